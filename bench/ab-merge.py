#!/usr/bin/env python3
# ab-merge.py RAW1 RAW2 ...: the raw lines of several bench/device-ab.sh ab_sweep
# calls (e.g. bench/ab-hosts.sh -o, once per variant order) as one stream for
# bench/ab-table.py: one section per title, the rounds of each later file
# numbered after those of the files before it (so --paired pairs them right).
import re, sys
order, lines, offset = [], {}, 0
for path in sys.argv[1:]:
    top, title = 0, None
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith("== "):
            title = line
            if title not in lines:
                order.append(title); lines[title] = []
            continue
        m = re.match(r"^(\S+) (\d+): (.*)$", line)
        if m and title:
            r = int(m.group(2)); top = max(top, r)
            lines[title].append(f"{m.group(1)} {r + offset}: {m.group(3)}")
    offset += top
for t in order:
    print(t); print("\n".join(lines[t]))
