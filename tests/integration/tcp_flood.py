#!/usr/bin/env python3
"""tcp_flood.py -- floods a plait tcp acceptor with connections (t-pt2pt.sh).

Waits for a real rank's hello on loopback (tcp_replay.sniff: AF_PACKET,
needs root) to learn a live job's tcp port, then opens SILENT connections
that never say hello and GARBAGE ones that send random bytes. The acceptor
keeps at most 64 connections that have not said hello (transport/tcp:
TCP_UNKNOWN_MAX) and closes the rest at once, so at least SILENT - 64 of
the silent ones must be closed within 2 s while the job still listens.

Usage: tcp_flood.py SECONDS SEED [SILENT [GARBAGE]]
Exit 0: as expected; 1: too few closed; 2: no hello seen; 3: the job ended
before the check (inconclusive).
"""
import os
import random
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tcp_replay import sniff  # noqa: E402

CAP = 64


def closed_by_peer(c):
    """True when the peer closed c (EOF or reset)."""
    try:
        return c.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True


def main():
    seconds, seed = float(sys.argv[1]), int(sys.argv[2])
    silent = int(sys.argv[3]) if len(sys.argv) > 3 else 150
    garbage = int(sys.argv[4]) if len(sys.argv) > 4 else 30
    found = sniff(time.time() + seconds)
    if not found:
        print("tcp_flood: no hello seen", file=sys.stderr)
        return 2
    port = found[0]
    t0 = time.time()
    rng = random.Random(seed)
    quiet = []
    for _ in range(silent):
        c = socket.create_connection(("127.0.0.1", port), timeout=5)
        c.setblocking(False)   # (a timeout would make each recv wait for it)
        quiet.append(c)
    for _ in range(garbage):
        try:
            g = socket.create_connection(("127.0.0.1", port), timeout=5)
            g.sendall(bytes(rng.randrange(256) for _ in range(rng.randint(1, 200))))
            g.close()
        except OSError:
            pass
    deadline, shut = time.time() + 2, 0
    while time.time() < deadline:
        shut = sum(closed_by_peer(c) for c in quiet)
        if shut >= silent - CAP:
            break
        time.sleep(0.1)
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except OSError:
        print("tcp_flood: the job ended before the check", file=sys.stderr)
        return 3
    for c in quiet:
        c.close()
    print("tcp_flood: port %d, %d silent connections (%d closed by the acceptor within 2 s), "
          "%d with random bytes (seed %d); %.1f s" % (port, silent, shut, garbage, seed, time.time() - t0))
    return 0 if shut >= silent - CAP else 1


if __name__ == "__main__":
    sys.exit(main())
