#!/bin/sh
# Generates configure and Makefile.in from configure.ac / Makefile.am (needs autotools + libtool).
set -e
cd "$(dirname "$0")"
autoreconf -fi
