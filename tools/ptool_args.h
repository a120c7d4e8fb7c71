/* ptool_args.h -- command-line value parsing shared by the benchmark methods
 * (ptool_pt2pt.c, ptool_coll.c), and so by plait-bench and its MPI twins. */
#ifndef PLAIT_TOOLS_PTOOL_ARGS_H
#define PLAIT_TOOLS_PTOOL_ARGS_H

#include <stddef.h>
#include <stdio.h>

/* "4096", "64K", "16M", "1G", "64KiB", "8B" (powers of 1024) up to limit:
 * 0 and *out set, or -1. */
int  ptool_parse_size(const char *s, size_t limit, size_t *out);
/* A decimal integer in [lo, hi]: 0 and *out set, or -1. */
int  ptool_parse_long(const char *s, long lo, long hi, long *out);
/* "prog: <fmt with arg>" and the --help hint on err (when not NULL). */
void ptool_arg_error(FILE *err, const char *prog, const char *fmt, const char *arg);

#endif
