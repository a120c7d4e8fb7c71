/*
 * ptool_pt2pt.h -- the OSU-style point-to-point benchmarks (latency, bandwidth),
 * written once against a small table of messaging calls so that the very same
 * method runs on plait (tools/plait-bench.c) and on MPI (bench/osu_mpi_pt2pt.c).
 * Side-by-side numbers are only comparable when nothing but the library differs.
 *
 * This file and ptool_pt2pt.c use libc only: no plait.h, no mpi.h.
 */
#ifndef PLAIT_TOOLS_PTOOL_PT2PT_H
#define PLAIT_TOOLS_PTOOL_PT2PT_H

#include <stddef.h>
#include <stdio.h>

/* Most messages a bandwidth window may keep in flight (backends size their
 * request arrays with it). */
#define PTOOL_MAX_WINDOW 1024

/* The messaging calls a library offers the benchmark. Every call returns 0 on
 * success; on failure the benchmark hands the code to fail(), which ends the job. */
typedef struct ptool_pt2pt_backend {
    const char *name;            /* "plait", "Open MPI" */
    char        version[128];    /* library version text for the header */
    int         rank, size;      /* in the world */
    int  (*send)(const void *buf, size_t len, int peer, int tag);
    int  (*recv)(void *buf, size_t len, int peer, int tag);
    /* Non-blocking calls keep their request in slot (0 .. PTOOL_MAX_WINDOW-1). */
    int  (*isend)(const void *buf, size_t len, int peer, int tag, int slot);
    int  (*irecv)(void *buf, size_t len, int peer, int tag, int slot);
    /* Completes slots 0 .. n-1. */
    int  (*waitall)(int n);
    double (*wtime)(void);       /* seconds, monotonic */
    /* Reports what failed (rc is the library's code; 0: what failed outside
     * it, and what says why) and ends every rank;
     * must not return. */
    void (*fail)(const char *what, int rc);
} ptool_pt2pt_backend_t;

enum { PTOOL_MODE_LATENCY = 1, PTOOL_MODE_BW = 2, PTOOL_MODE_BOTH = 3 };

typedef struct ptool_pt2pt_opts {
    int         modes;           /* PTOOL_MODE_* bits */
    size_t      min_size;
    size_t      max_size;        /* 0: the mode's default */
    long        iters;           /* 0: size-dependent default */
    long        warmup;          /* -1: size-dependent default */
    int         window;
    int         check;           /* 1: random data, verified by the receiver */
    const char *json_path;       /* NULL: no JSON file */
    const char *prog;            /* command shown in the header, e.g. "plait-bench pt2pt" */
} ptool_pt2pt_opts_t;

/* Parse result: run, or stop with the given exit status. */
enum { PTOOL_PARSE_RUN = 0, PTOOL_PARSE_HELP = 1, PTOOL_PARSE_ERROR = 2 };

/*
 * Parses "[latency|bw|both] [options]" (argv[0] is the program or family name).
 * Errors are printed on err (NULL: silent, e.g. on ranks other than 0).
 * prog is the command shown in the usage text.
 */
int ptool_pt2pt_parse(int argc, char **argv, ptool_pt2pt_opts_t *o, const char *prog, FILE *err);

void ptool_pt2pt_usage(FILE *out, const char *prog);

/*
 * Runs the selected benchmarks on ranks 0 and 1 (every other rank returns at
 * once and should wait in a barrier). Rank 0 prints the tables on stdout and
 * writes the JSON file. Returns 0, or 1 when --check found wrong data (or the
 * JSON file could not be written) — on rank 0 and rank 1 alike.
 */
int ptool_pt2pt_run(const ptool_pt2pt_opts_t *o, const ptool_pt2pt_backend_t *be);

#endif
