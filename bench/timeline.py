#!/usr/bin/env python3
"""timeline.py -- per-message timelines from PLAIT_TRACE files.

Run a job with PLAIT_TRACE=DIR (an existing directory; every rank writes
DIR/plait-trace.RANK.txt at plait_finalize; runtime/trace.c lists the
events), then

  bench/timeline.py DIR                  phases of every rendezvous, medians
                                         per pair of ranks and message size
  bench/timeline.py DIR --message K      also the events of the pair's K-th
                                         message, on its two ranks
  bench/timeline.py DIR --check          exit 1 unless each message's events
                                         come in causal order and none is
                                         missing (a test uses it)

A message is a rendezvous from rank X to rank Y, tied together by request
ids: X's RTS (R) and Y's receipt of it (r) carry X's send id; Y's CTS (C)
and X's receipt of it (c) carry both ids; the DATA frames X hands its
transport (D) and Y delivers (F) carry Y's receive id. Only rendezvous
messages are traced; inside a host the shared-memory transport reads the
data itself (no CTS, no DATA: only the rts phase). Times of two ranks compare
only where they share a clock (one host; namespace hosts do).
Phases, in microseconds: rts (R to r), match (r to C), cts (C to c),
start (c to the first D), data (the first D to the last F), total (R to the
last F).
"""
import argparse
import bisect
import collections
import glob
import os
import statistics
import sys

PHASES = ["rts", "match", "cts", "start", "data", "total"]
THREADS = {}   # (rank, thread number) -> the thread's name, from the files' headers


def warn(msg):
    print("timeline.py: " + msg, file=sys.stderr)


def load_file(f):
    """(header fields, events) of one rank's file; None when unusable."""
    hdr, evs = None, []
    with open(f) as fh:
        for n, line in enumerate(fh, 1):
            if line.startswith("# plait trace:"):
                w = line.split()
                hdr = dict(zip(w[3::2], w[4::2]))
                continue
            if line.startswith("# thread ") and hdr is not None:
                w = line.split()
                if len(w) >= 4:
                    THREADS[(int(hdr["rank"]), int(w[2]))] = w[3]
                continue
            if line.startswith("#") or not line.strip():
                continue
            w = line.split()
            if hdr is None or len(w) != 6:
                warn("%s:%d: not an event line: left out from here" % (f, n))
                break
            try:
                evs.append((int(w[0]), int(hdr["rank"]), int(w[1]), w[2], int(w[3]),
                            int(w[4]), int(w[5])))
            except ValueError:
                warn("%s:%d: not an event line: left out from here" % (f, n))
                break
    if hdr is None:
        warn("%s: no header (a rank that never reached plait_finalize?): left out" % f)
        return None
    return hdr, evs


def load(d):
    files = sorted(glob.glob(os.path.join(d, "plait-trace.*.txt")))
    if not files:
        sys.exit("timeline.py: no plait-trace.*.txt in %s (was PLAIT_TRACE set?)" % d)
    evs, jobs, dropped = [], set(), 0
    for f in files:
        got = load_file(f)
        if not got:
            continue
        hdr, e = got
        jobs.add(hdr.get("job", "-"))
        if int(hdr.get("dropped", 0)):
            dropped += int(hdr["dropped"])
            warn("rank %s dropped %s events (its buffer was full): later messages are "
                 "incomplete" % (hdr["rank"], hdr["dropped"]))
        evs += e
    if len(jobs) > 1:
        warn("the files come from %d different jobs (%s): use an empty directory per run"
             % (len(jobs), ", ".join(sorted(jobs))))
    evs.sort()
    return evs, dropped


def messages(evs):
    """One dict per rendezvous: src, dst, len and the times of its events."""
    by = collections.defaultdict(list)   # (rank, event, id) -> [(t, event tuple)]
    for e in evs:
        by[(e[1], e[3], e[6])].append(e)
    out = []
    for e in evs:
        if e[3] != "R":
            continue
        x, y, sid = e[1], e[5], e[6]
        m = {"src": x, "dst": y, "len": e[4], "sid": sid, "R": e[0]}
        r = [a for a in by[(y, "r", sid)] if a[5] == x]
        if r:
            m["r"] = r[0][0]
        C = [a for a in by[(y, "C", sid)] if a[5] == x]
        c = [a for a in by[(x, "c", sid)] if a[5] == y]
        if C:
            m["C"], rid = C[0][0], C[0][4]
            if c:
                m["c"] = c[0][0]
            D = [a for a in by[(x, "D", rid)] if a[5] == y]
            F = [a for a in by[(y, "F", rid)] if a[5] == x]
            if D:
                m["D"] = D[0][0]
            if F:
                m["F"] = F[-1][0]
        out.append(m)
    return out


def phases(m):
    p = {}
    def span(name, a, b):
        if a in m and b in m:
            p[name] = (m[b] - m[a]) / 1e3
    span("rts", "R", "r")
    span("match", "r", "C")
    span("cts", "C", "c")
    span("start", "c", "D")
    span("data", "D", "F")
    span("total", "R", "F")
    return p


def check(msgs, dropped):
    """Events out of causal order; and, when no event was dropped, messages
    missing one (an RTS never received, a CTS without its DATA)."""
    bad = []
    for m in msgs:
        need = ["R", "r"] + (["C", "c", "D", "F"] if "C" in m else [])
        missing = [n for n in need if n not in m]
        if missing and not dropped:
            bad.append("message %d from rank %d to %d: no %s event"
                       % (m["sid"], m["src"], m["dst"], " ".join(missing)))
        order = [n for n in ("R", "r", "C", "c", "D", "F") if n in m]
        for a, b in zip(order, order[1:]):
            if m[a] > m[b]:
                bad.append("message %d from rank %d to %d: %s at %d ns after %s at %d ns"
                           % (m["sid"], m["src"], m["dst"], a, m[a], b, m[b]))
    return bad


def show(evs, m):
    """The events of message m's two ranks from its RTS to its last event."""
    end = max(v for k, v in m.items() if k in ("R", "r", "C", "c", "D", "F"))
    times = [e[0] for e in evs]
    i = bisect.bisect_left(times, m["R"])
    print("\n## message %d (send id) of rank %d -> %d, %d bytes: events from its RTS "
          "(us, rank.thread)" % (m["sid"], m["src"], m["dst"], m["len"]))
    names = ["%d.%d %s" % (r, t, n) for (r, t), n in sorted(THREADS.items())
             if r in (m["src"], m["dst"])]
    if names:
        print("# threads: " + ", ".join(names))
    while i < len(evs) and evs[i][0] <= end:
        e = evs[i]
        if e[1] in (m["src"], m["dst"]):
            print("%9.1f  %d.%-3d %s %d %d %d" % ((e[0] - m["R"]) / 1e3, e[1], e[2], e[3],
                                                  e[4], e[5], e[6]))
        i += 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--message", type=int, metavar="K",
                    help="print the events of the K-th message of the first pair of ranks")
    ap.add_argument("--check", action="store_true", help="verify causal order; exit 1 if violated")
    ap.add_argument("--skip", type=float, default=0.1,
                    help="fraction of each group's first messages left out of the medians (warm-up)")
    o = ap.parse_args()
    evs, dropped = load(o.dir)
    msgs = messages(evs)
    print("# %d events, %d rendezvous messages in %s" % (len(evs), len(msgs), o.dir))
    if o.check:
        bad = check(msgs, dropped)
        for b in bad[:20]:
            print("out of order: " + b)
        if not msgs:
            print("check: no rendezvous traced")
            return 1
        if bad:
            print("check: %d violations in %d messages" % (len(bad), len(msgs)))
            return 1
        print("check: every message's events in causal order")
    groups = collections.defaultdict(list)
    for m in msgs:
        groups[(m["src"], m["dst"], m["len"])].append(m)
    for (x, y, n), ms in sorted(groups.items()):
        ms = ms[int(len(ms) * o.skip):]
        print("\n## rank %d -> %d, %d bytes: %d messages (median us)" % (x, y, n, len(ms)))
        ph = [phases(m) for m in ms]
        for name in PHASES:
            v = [p[name] for p in ph if name in p]
            if v:
                print("%-6s %9.1f   (min %.1f, max %.1f, %d messages)"
                      % (name, statistics.median(v), min(v), max(v), len(v)))
    if o.message is not None and msgs:
        first = [m for m in msgs if (m["src"], m["dst"]) == (msgs[0]["src"], msgs[0]["dst"])]
        if o.message >= len(first):
            sys.exit("timeline.py: rank %d -> %d has %d messages"
                     % (first[0]["src"], first[0]["dst"], len(first)))
        show(evs, first[o.message])
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:   # (| head)
        sys.exit(0)
