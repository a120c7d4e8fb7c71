#!/usr/bin/env python3
"""tcp_replay.py -- replays a plait tcp hello at its acceptor (t-pt2pt.sh).

Sniffs the loopback interface (AF_PACKET, needs root) for the first TCP
payload that starts with the tcp transport's magic ("PLITTCP1"), i.e. a
real rank's hello on a live job, then opens a connection of its own to the
same port and sends that hello again, followed by frames of random bytes.
The acceptor must refuse it (one connection per rank and job), so nothing
of it reaches the program.

Usage: tcp_replay.py SECONDS SEED   (exit 0: replayed, 2: no hello seen)
"""
import os
import random
import socket
import struct
import sys
import time

MAGIC = b"PLITTCP1"
HELLO = 24


def sniff(deadline):
    """(destination port, hello bytes) of the first hello seen on lo."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
    s.bind(("lo", 0))
    s.settimeout(0.2)
    while time.time() < deadline:
        try:
            frame = s.recv(65536)
        except socket.timeout:
            continue
        ip = frame[14:]   # loopback frames carry an Ethernet header
        if len(ip) < 20 or ip[0] >> 4 != 4 or ip[9] != 6:
            continue
        tcp = ip[(ip[0] & 15) * 4:]
        if len(tcp) < 20:
            continue
        payload = tcp[(tcp[12] >> 4) * 4:]
        if payload[:8] == MAGIC and len(payload) >= HELLO:
            return struct.unpack("!H", tcp[2:4])[0], payload[:HELLO]
    return None


def main():
    seconds, seed = float(sys.argv[1]), int(sys.argv[2])
    found = sniff(time.time() + seconds)
    if not found:
        print("tcp_replay: no hello seen", file=sys.stderr)
        return 2
    port, hello = found
    rng = random.Random(seed)
    c = socket.create_connection(("127.0.0.1", port), timeout=5)
    frames = b""
    for _ in range(20):   # well-formed lengths, random contents
        h, p = rng.randint(8, 64), rng.randint(0, 4096)
        frames += struct.pack("<II", h, p) + os.urandom(h + p)
    try:
        c.sendall(hello + frames)
        time.sleep(0.5)
    except OSError:
        pass   # refused and closed: what we hoped for
    c.close()
    print("tcp_replay: replayed a hello to port %d (seed %d)" % (port, seed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
