#!/usr/bin/env python3
"""ab-table.py -- median tables from the lines of bench/device-ab.sh's ab_sweep.

Input (files or stdin): "== TITLE" starts a section (one benchmark); each
"VARIANT ROUND: size value | size value | ..." line is one run of VARIANT.
Output: per section, a markdown table with one row per size, the median of
each variant's runs and the number of runs, and, when a variant named "ompi"
is present, each other variant's ratio ompi / variant (values are times:
> 1 means faster than Open MPI; for bandwidth sections pass --bw, then the
ratio is variant / ompi).

Usage: bench/ab-table.py [--bw] [FILE...]
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
                    runs.setdefault(int(f[0]), []).append(float(f[1]))
                except ValueError:
                    pass
    return sections


def table(title, data, bw):
    variants = list(data)
    sizes = sorted({s for v in variants for s in data[v]})
    head = ["size"] + [f"{v} (n)" for v in variants]
    peers = [v for v in variants if v != "ompi"] if "ompi" in data else []
    head += [f"ratio {v}" for v in peers]
    out = [f"### {title}" if title else "", "", "| " + " | ".join(head) + " |",
           "|" + "---:|" * len(head)]
    for s in sizes:
        med = {v: statistics.median(data[v][s]) for v in variants if data[v].get(s)}
        row = [str(s)] + [f"{med[v]:.1f} ({len(data[v][s])})" if v in med else "" for v in variants]
        for v in peers:
            if v in med and "ompi" in med and med[v] > 0 and med["ompi"] > 0:
                row.append(f"{(med[v] / med['ompi'] if bw else med['ompi'] / med[v]):.2f}")
            else:
                row.append("")
        out.append("| " + " | ".join(row) + " |")
    return "\n".join(out)


def main(argv):
    bw = "--bw" in argv
    files = [a for a in argv if a != "--bw"]
    lines = []
    for f in files or ["-"]:
        lines += (sys.stdin if f == "-" else open(f)).readlines()
    for title, data in parse(lines):
        print(table(title, data, bw))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
