#!/usr/bin/env python3
"""ab-table.py -- median tables from the lines of bench/device-ab.sh's ab_sweep.

Input (files or stdin): "== TITLE" starts a section (one benchmark); each
"VARIANT ROUND: size value | size value | ..." line is one run of VARIANT.
Output: per section, a markdown table with one row per size, the median of
each variant's runs and the number of runs, and, when a variant named "ompi"
is present, each other variant's ratio ompi / variant (values are times:
> 1 means faster than Open MPI; in bandwidth sections, those whose title
says "MB/s" or "GB/s" or all with --bw, the ratio is variant / ompi, so > 1
still means plait ahead).

--paired BASE NEW adds, per section, the ratio NEW / BASE of each round (the
two ran back to back in it) and how many rounds NEW was faster: the device
machines move a cell's median by up to 20% between identical variants
(docs/PERFORMANCE.md, session 14), so a change is claimed where it shows
round by round.

Usage: bench/ab-table.py [--bw] [--paired BASE NEW] [FILE...]
"""
import re
import statistics
import sys


def parse(lines):
    sections, title = [], None
    for line in lines:
        line = line.rstrip("\n")
        if line.startswith("== "):
            title = line[3:].strip()
            sections.append((title, {}))
            continue
        m = re.match(r"^(\S+) (\d+): (.*)$", line)
        if not m:
            continue
        if not sections:
            sections.append(("", {}))
        runs = sections[-1][1].setdefault(m.group(1), {})
        for cell in m.group(3).split("|"):
            f = cell.split()
            if len(f) == 2:
                try:
                    runs.setdefault(int(f[0]), []).append((int(m.group(2)), float(f[1])))
                except ValueError:
                    pass
    return sections


def values(runs):
    return [v for _, v in runs]


def table(title, data, bw):
    variants = list(data)
    sizes = sorted({s for v in variants for s in data[v]})
    head = ["size"] + [f"{v} (n)" for v in variants]
    peers = [v for v in variants if v != "ompi"] if "ompi" in data else []
    head += [f"ratio {v}" for v in peers]
    out = [f"### {title}" if title else "", "", "| " + " | ".join(head) + " |",
           "|" + "---:|" * len(head)]
    for s in sizes:
        med = {v: statistics.median(values(data[v][s])) for v in variants if data[v].get(s)}
        row = [str(s)] + [f"{med[v]:.1f} ({len(data[v][s])})" if v in med else "" for v in variants]
        for v in peers:
            if v in med and "ompi" in med and med[v] > 0 and med["ompi"] > 0:
                row.append(f"{(med[v] / med['ompi'] if bw else med['ompi'] / med[v]):.2f}")
            else:
                row.append("")
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out)


def paired(title, data, bw, base, new):
    """NEW / BASE per round (times; BASE / NEW for bandwidth: < 1 is NEW better)."""
    if base not in data or new not in data:
        return ""
    out = [f"#### {title}: {new} / {base} per round (< 1: {new} better)", "",
           f"| size | per round | {new} better |", "|---:|---|---:|"]
    for s in sorted(set(data[base]) & set(data[new])):
        b, n = dict(data[base][s]), dict(data[new][s])
        r = [(b[k] / n[k] if bw else n[k] / b[k]) for k in sorted(set(b) & set(n)) if b[k] > 0 and n[k] > 0]
        out.append(f"| {s} | {' '.join(f'{x:.2f}' for x in r)} | {sum(x < 1 for x in r)} of {len(r)} |")
    return "\n".join(out)


def main(argv):
    bw, pair, files, i = False, None, [], 0
    while i < len(argv):
        if argv[i] == "--bw":
            bw = True
        elif argv[i] == "--paired" and i + 2 < len(argv):
            pair = (argv[i + 1], argv[i + 2])
            i += 2
        elif argv[i] in ("-h", "--help") or argv[i].startswith("--"):
            print(__doc__)
            return 0 if argv[i] in ("-h", "--help") else 2
        else:
            files.append(argv[i])
        i += 1
    lines = []
    for f in files or ["-"]:
        lines += (sys.stdin if f == "-" else open(f)).readlines()
    for title, data in parse(lines):
        sec_bw = bw or bool(re.search(r"[MG]B/s", title))
        print(table(title, data, sec_bw))
        print()
        if pair:
            extra = paired(title, data, sec_bw, *pair)
            if extra:
                print(extra)
                print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
