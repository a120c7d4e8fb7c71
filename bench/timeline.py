#!/usr/bin/env python3
"""timeline.py -- per-message timelines from PLAIT_TRACE files.

Run a job with PLAIT_TRACE=DIR (every rank writes DIR/plait-trace.RANK.txt at
plait_finalize; runtime/trace.c lists the events), then

  bench/timeline.py DIR                  phases of every rendezvous, medians
  bench/timeline.py DIR --message K      also every event of message K, merged
  bench/timeline.py DIR --check          exit 1 unless each message's events
                                         come in causal order (a test uses it)

A message is a rendezvous from rank X to rank Y: X's k-th RTS to Y (R) is
Y's k-th RTS from X (r); where the receiver answered with a CTS (between
hosts), Y's k-th CTS to X (C) is X's k-th one from Y (c), the first DATA
frame X hands its transport after it is D, and the message ends at the last
DATA frame Y delivers from X (F) before X's next RTS arrives. Times of two
ranks compare only where they share a clock (one host; namespace hosts do).
Phases, in microseconds: rts (R to r), match (r to C), cts (C to c),
start (c to D), data (D to the last F), total (R to the last F).
"""
import argparse
import glob
import os
import statistics
import sys

PHASES = ["rts", "match", "cts", "start", "data", "total"]


def load(d):
    evs = []
    files = sorted(glob.glob(os.path.join(d, "plait-trace.*.txt")))
    if not files:
        sys.exit("timeline.py: no plait-trace.*.txt in %s (was PLAIT_TRACE set?)" % d)
    for f in files:
        rank = None
        with open(f) as fh:
            for line in fh:
                if line.startswith("# plait trace:"):
                    rank = int(line.split()[4])
                    continue
                if line.startswith("#") or not line.strip():
                    continue
                t, tid, ev, a, b = line.split()
                evs.append((int(t), rank, int(tid), ev, int(a), int(b)))
        if rank is None:
            sys.exit("timeline.py: %s has no header line" % f)
    evs.sort()
    return evs


def kth(evs, rank, ev, peer):
    """Times of rank's events ev naming peer, in order."""
    return [e[0] for e in evs if e[1] == rank and e[3] == ev and e[5] == peer]


def messages(evs):
    """One dict per rendezvous: src, dst, k and the times of its events."""
    out = []
    pairs = sorted({(e[1], e[5]) for e in evs if e[3] == "R"})
    for x, y in pairs:
        R, r = kth(evs, x, "R", y), kth(evs, y, "r", x)
        C, c = kth(evs, y, "C", x), kth(evs, x, "c", y)
        D, F = kth(evs, x, "D", y), kth(evs, y, "F", x)
        for k in range(min(len(R), len(r))):
            m = {"src": x, "dst": y, "k": k, "R": R[k], "r": r[k]}
            if k < len(C) and k < len(c):
                m["C"], m["c"] = C[k], c[k]
                later = [t for t in D if t >= c[k]]
                if later:
                    m["D"] = later[0]
                end = r[k + 1] if k + 1 < len(r) else float("inf")
                fs = [t for t in F if r[k] <= t < end]
                if fs:
                    m["F"] = fs[-1]
            out.append(m)
    return out


def phases(m):
    p = {"rts": (m["r"] - m["R"]) / 1e3}
    if "C" in m:
        p["match"] = (m["C"] - m["r"]) / 1e3
        p["cts"] = (m["c"] - m["C"]) / 1e3
    if "D" in m:
        p["start"] = (m["D"] - m["c"]) / 1e3
    if "D" in m and "F" in m:
        p["data"] = (m["F"] - m["D"]) / 1e3
        p["total"] = (m["F"] - m["R"]) / 1e3
    return p


def check(msgs):
    bad = []
    for m in msgs:
        order = [n for n in ("R", "r", "C", "c", "D", "F") if n in m]
        for a, b in zip(order, order[1:]):
            if m[a] > m[b]:
                bad.append("message %d from rank %d to %d: %s at %d ns after %s at %d ns"
                           % (m["k"], m["src"], m["dst"], a, m[a], b, m[b]))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--message", type=int, help="print every event of message K (of the first pair)")
    ap.add_argument("--check", action="store_true", help="verify causal order; exit 1 if violated")
    ap.add_argument("--skip", type=float, default=0.1,
                    help="fraction of each pair's first messages left out of the medians (warm-up)")
    o = ap.parse_args()
    evs = load(o.dir)
    msgs = messages(evs)
    print("# %d events, %d rendezvous messages in %s" % (len(evs), len(msgs), o.dir))
    if o.check:
        bad = check(msgs)
        for b in bad[:20]:
            print("out of order: " + b)
        if bad or not msgs:
            print("check: %d violations in %d messages" % (len(bad), len(msgs)))
            return 1
        print("check: every message's events in causal order")
    for x, y in sorted({(m["src"], m["dst"]) for m in msgs}):
        ms = [m for m in msgs if (m["src"], m["dst"]) == (x, y)]
        ms = ms[int(len(ms) * o.skip):]
        print("\n## rank %d -> %d: %d messages (median us)" % (x, y, len(ms)))
        for name in PHASES:
            v = [phases(m)[name] for m in ms if name in phases(m)]
            if v:
                print("%-6s %9.1f   (min %.1f, max %.1f)" % (name, statistics.median(v), min(v), max(v)))
    if o.message is not None and msgs:
        ms = [m for m in msgs if (m["src"], m["dst"]) == (msgs[0]["src"], msgs[0]["dst"])]
        if o.message >= len(ms):
            sys.exit("timeline.py: there are %d messages" % len(ms))
        m = ms[o.message]
        end = m.get("F", m["r"])
        print("\n## message %d, rank %d -> %d: events from its RTS (us, rank.thread)"
              % (o.message, m["src"], m["dst"]))
        for e in evs:
            if m["R"] <= e[0] <= end:
                print("%9.1f  %d.%-3d %s %d %d" % ((e[0] - m["R"]) / 1e3, e[1], e[2], e[3], e[4], e[5]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
