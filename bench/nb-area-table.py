#!/usr/bin/env python3
"""nb-area-table.py RAW -- median tables of bench/nb-area.sh output.

One table per rank count: per size, the blocking allreduce and the
non-blocking one started then waited at once (us), base and new, with
new / base of the non-blocking time and of the blocking time, and the share
of the blocking time hidden behind computation (new), and Open MPI's
blocking and non-blocking times with its ratio to new (> 1: plait faster).
Medians over rounds;
the number of rounds is printed in the heading."""
import re
import statistics
import sys
from collections import defaultdict


def parse(path):
    cells = defaultdict(lambda: defaultdict(list))   # (ranks, build) -> size -> [(b, nb, hid)]
    ranks = None
    for line in open(path, encoding="utf-8", errors="replace"):
        m = re.match(r"== (\d+)", line)
        if m:
            ranks = int(m.group(1))
            continue
        m = re.match(r"(base|new|ompi) (\d+): (.*)", line)
        if not m or ranks is None:
            continue
        for cell in m.group(3).split("|"):
            f = cell.split()
            if len(f) == 4:
                size, blk, nbw, hid = f
                cells[(ranks, m.group(1))][int(size)].append(
                    (float(blk), float(nbw), float(hid.rstrip("%"))))
    return cells


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    cells = parse(sys.argv[1])
    for ranks in sorted({k[0] for k in cells}):
        base, new, ompi = (cells[(ranks, b)] for b in ("base", "new", "ompi"))
        n = min(len(v) for v in list(base.values()) + list(new.values()))
        print(f"\n{ranks} ranks, one host, bound (median of {n} rounds, us)\n")
        print("| size | blocking base | blocking new | nb-wait base | nb-wait new "
              "| nb-wait new/base | blocking new/base | hidden (new) | Open MPI blocking "
              "| Open MPI nb-wait | nb-wait Open MPI/new |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for size in sorted(set(base) & set(new)):
            bb, bn = med([c[0] for c in base[size]]), med([c[0] for c in new[size]])
            wb, wn = med([c[1] for c in base[size]]), med([c[1] for c in new[size]])
            ob, ow = med([c[0] for c in ompi[size]]), med([c[1] for c in ompi[size]])
            hid = med([c[2] for c in new[size]])
            print(f"| {size} | {bb:.2f} | {bn:.2f} | {wb:.2f} | {wn:.2f} | {wn / wb:.2f} "
                  f"| {bn / bb:.2f} | {hid:.0f}% | {ob:.2f} | {ow:.2f} | {ow / wn:.2f} |")


if __name__ == "__main__":
    main()
