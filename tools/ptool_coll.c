/*
 * ptool_coll.c -- nccl-tests style collective benchmarks over a backend table
 * (see ptool_coll.h). The method and the output follow NVIDIA's nccl-tests so
 * that numbers read like theirs:
 *
 *  size     bytes of the whole operation as nccl-tests counts them: the vector
 *           for allreduce, bcast, reduce; all n blocks for allgather,
 *           reduce_scatter, alltoall(v), gather, scatter (so the per-rank
 *           block is size / n, rounded down to whole 16-byte units as
 *           nccl-tests does).
 *  time     after `warmup` untimed calls and a barrier, `iters` calls back to
 *           back are timed; the time per call is averaged over the ranks.
 *  algbw    size / time (GB/s, 10^9 bytes per second).
 *  busbw    algbw x the nccl-tests factor of the collective: allreduce
 *           2(n-1)/n; allgather, reduce_scatter, alltoall(v), gather, scatter
 *           (n-1)/n; bcast, reduce 1. It is what each rank's busiest link
 *           carries, comparable across rank counts.
 *  #wrong   with -c: the calls are repeated on fresh inputs (small integers,
 *           exact in every type) into poisoned outputs and every element is
 *           compared with the value computed locally; summed over ranks,
 *           for the first of the -c checks that finds any (nccl-tests).
 *
 * Out-of-place and in-place calls are measured for every size (columns as in
 * nccl-tests); the footer gives, as nccl-tests' does, the number of failed
 * checks (one per size, placement and rank that saw wrong values: "Out of
 * bounds values") and the mean busbw.
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptool_args.h"
#include "ptool_coll.h"

#define PTOOL_SIZE_LIMIT ((size_t)1 << 32)

static const char *const ptool_coll_names[PTOOL_C_N] = {
    "allreduce", "allgather", "reduce_scatter", "alltoall", "bcast", "reduce", "gather",
    "scatter", "alltoallv", "barrier"};
static const char *const ptool_type_names[PTOOL_T_N] = {
    "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "bfloat16", "float", "double"};
static const size_t ptool_type_size[PTOOL_T_N] = {1, 1, 4, 4, 8, 8, 2, 2, 4, 8};
static const char *const ptool_op_names[PTOOL_O_N] = {"sum", "prod", "max", "min", "avg"};

const char *ptool_coll_name(int coll) { return coll >= 0 && coll < PTOOL_C_N ? ptool_coll_names[coll] : "?"; }
const char *ptool_coll_type_name(int t) { return t >= 0 && t < PTOOL_T_N ? ptool_type_names[t] : "?"; }
const char *ptool_coll_op_name(int op) { return op >= 0 && op < PTOOL_O_N ? ptool_op_names[op] : "?"; }

static int ptool_is_float(int t);

static int ptool_is_reduction(int coll)
{
    return coll == PTOOL_C_ALLREDUCE || coll == PTOOL_C_REDUCE_SCATTER || coll == PTOOL_C_REDUCE;
}

static int ptool_is_rooted(int coll)
{
    return coll == PTOOL_C_BCAST || coll == PTOOL_C_REDUCE || coll == PTOOL_C_GATHER ||
           coll == PTOOL_C_SCATTER;
}

/* ------------------------------------------------------------ option parsing */

void ptool_coll_usage(FILE *out, const char *prog)
{
    fprintf(out,
        "Usage: %s COLL [options]\n"
        "nccl-tests style collective benchmark over every rank of the job.\n"
        "COLL: allreduce allgather reduce_scatter alltoall bcast reduce gather scatter\n"
        "      alltoallv barrier\n"
        "\n"
        "  -b, --minbytes SIZE   smallest size (default 8)\n"
        "  -e, --maxbytes SIZE   largest size (default 64M)\n"
        "  -f, --stepfactor N    multiply the size by N each step (default 2; 0 or 1: add -i)\n"
        "  -i, --stepbytes SIZE  add SIZE each step instead (alone, or with -f 0 or 1)\n"
        "  -d, --datatype TYPE   int8 uint8 int32 uint32 int64 uint64 half bfloat16 float\n"
        "                        double, or all (default float)\n"
        "  -o, --op OP           sum prod max min avg, or all (default sum; avg: floating\n"
        "                        types, N/A for integer types under all)\n"
        "  -r, --root N          root of bcast, reduce, gather, scatter (default 0; -1: every\n"
        "                        rank in turn)\n"
        "  -n, --iters N         timed iterations per size (default 20)\n"
        "  -w, --warmup_iters N  untimed iterations first (default 5)\n"
        "  -N, --run_cycles N    sweep the sizes N times (default 1; 0: forever)\n"
        "  -c, --check N         verify results up to N times per size, stopping at the\n"
        "                        first that finds wrong values (default 0: off)\n"
        "  -a, --algo NAME       force an algorithm by name (plait: a value of\n"
        "                        PLAIT_<COLL>_ALGO, listed by plait_info --algorithms)\n"
        "  -I, --inplace N       0: out-of-place only, 1: in-place only, 2: both (default)\n"
        "  -H, --hash            print a hash of every rank's results per size (on the\n"
        "                        check inputs), to compare libraries\n"
        "  -J, --json FILE       also write the results as JSON to FILE (this benchmark's\n"
        "                        own layout; --output_file is a synonym)\n"
        "  -h, --help            this text\n"
        "SIZE takes a K, M or G suffix (powers of 1024). size is the nccl-tests size:\n"
        "all n blocks for allgather, reduce_scatter, alltoall(v), gather, scatter, whose\n"
        "per-rank block is cut to whole 16-byte units as nccl-tests does.\n"
        "nccl-tests' -t -g -m -p -z -y -T -G -C -S -R -x -D -V -M -u -K, --average and\n"
        "--per_iter_timing are accepted with their neutral value only (-g 1, -G 0, ...).\n"
        "Unlike nccl-tests, -a names an algorithm and -I selects in-place calls.\n",
        prog);
}



static int ptool_lookup(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

static int ptool_perr(FILE *err, const char *prog, const char *fmt, const char *arg)
{
    ptool_arg_error(err, prog, fmt, arg);
    return PTOOL_COLL_ERROR;
}

/* nccl-tests' other spellings of the datatypes. */
#define PTOOL_NALIAS 6
static const char *const ptool_type_alias[PTOOL_NALIAS] = {
    "char", "int", "float16", "bf16", "float32", "float64"};
static const int ptool_type_alias_of[PTOOL_NALIAS] = {
    PTOOL_T_INT8, PTOOL_T_INT32, PTOOL_T_HALF, PTOOL_T_BFLOAT16, PTOOL_T_FLOAT, PTOOL_T_DOUBLE};

static int ptool_parse_type(const char *s, int *out)
{
    int a;
    *out = ptool_lookup(s, ptool_type_names, PTOOL_T_N);
    if (*out < 0 && (a = ptool_lookup(s, ptool_type_alias, PTOOL_NALIAS)) >= 0)
        *out = ptool_type_alias_of[a];
    return *out >= 0 ? 0 : -1;
}

/* Appends names[0..n) to buf, space-separated (within cap). */
static void ptool_names_cat(char *buf, size_t cap, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", i ? " " : "", names[i]);
}

/* "unknown WHAT 'arg' (the valid names[; or more])", from the tables. */
static int ptool_unknown(FILE *err, const char *prog, const char *what, const char *arg,
                         const char *const *names, int n, const char *const *more, int nmore,
                         const char *tail)
{
    char fmt[512];
    snprintf(fmt, sizeof fmt, "unknown %s '%%s' (", what);
    ptool_names_cat(fmt, sizeof fmt, names, n);
    if (nmore) {
        snprintf(fmt + strlen(fmt), sizeof fmt - strlen(fmt), "; or ");
        ptool_names_cat(fmt, sizeof fmt, more, nmore);
    }
    snprintf(fmt + strlen(fmt), sizeof fmt - strlen(fmt), ")%s", tail ? tail : "");
    return ptool_perr(err, prog, fmt, arg);
}

/*
 * nccl-tests options this benchmark has no use for (threads, GPUs, CUDA
 * streams and graphs, buffer registration...). A script written for
 * nccl-tests may pass them with their neutral value, which is accepted and
 * changes nothing; any other value is refused with the option named, rather
 * than the "unknown option" it used to get. --average and --per_iter_timing
 * are long-only here: their short letters -a and -I mean something else in
 * this benchmark (algorithm, in-place selection).
 */
enum { PTOOL_OPT_AVERAGE = 1000, PTOOL_OPT_PER_ITER };

typedef struct {
    int         c;          /* getopt code */
    const char *name;       /* nccl-tests' long name */
    long        neutral;    /* the value that asks for nothing */
    const char *why;
} ptool_nccl_only_t;

static const ptool_nccl_only_t ptool_nccl_only_opts[] = {
    {'t', "nthreads", 1, "one rank per process: start more ranks with the launcher"},
    {'g', "ngpus", 1, "one rank per process: start more ranks with the launcher"},
    {'m', "agg_iters", 1, "calls are not aggregated into groups"},
    {'p', "parallel_init", 0, "one thread per process"},
    {'z', "blocking", 0, "the calls block until done; barrier modes are not implemented"},
    {'y', "stream_null", 0, "CUDA streams: GPU only"},
    {'T', "timeout", 0, "use the library's timeout setting (plait: PLAIT_TIMEOUT)"},
    {'G', "cudagraph", 0, "CUDA graphs: GPU only"},
    {'C', "report_cputime", 0, "the time column is host time already"},
    {'S', "report_timestamps", 0, "not implemented"},
    {'R', "local_register", 0, "buffer registration: GPU only"},
    {'x', "cta_policy", -1, "CTA policy: GPU only"},
    {'D', "device_implementation", 0, "GPU only"},
    {'V', "device_cta_count", 16, "GPU only"},
    {'M', "memory", 0, "GPU memory report: GPU only"},
    {'u', "unalign", 0, "not implemented"},
    {'K', "per_iter_skip", 0, "per-iteration timing is not implemented"},
    {PTOOL_OPT_AVERAGE, "average", 1, "only the mean over ranks (1) is reported"},
    {PTOOL_OPT_PER_ITER, "per_iter_timing", 0, "not implemented"},
};
#define PTOOL_N_NCCL_ONLY (sizeof ptool_nccl_only_opts / sizeof ptool_nccl_only_opts[0])

static int ptool_nccl_only(int c, const char *arg, const char *prog, FILE *err)
{
    for (size_t i = 0; i < PTOOL_N_NCCL_ONLY; i++) {
        const ptool_nccl_only_t *q = &ptool_nccl_only_opts[i];
        long v;
        char fmt[320], flag[40];
        if (q->c != c)
            continue;
        if (ptool_parse_long(arg, -1000000, 1000000000L, &v) == 0 && v == q->neutral)
            return PTOOL_COLL_RUN;
        if (c < 256)
            snprintf(flag, sizeof flag, "-%c", c);
        else
            snprintf(flag, sizeof flag, "--%s", q->name);
        snprintf(fmt, sizeof fmt, "%s '%%s': nccl-tests' --%s is not supported here (%s); "
                 "only %s %ld is accepted", flag, q->name, q->why, flag, q->neutral);
        return ptool_perr(err, prog, fmt, arg);
    }
    return PTOOL_COLL_ERROR;
}

static int ptool_parse_opt(int c, const char *arg, ptool_coll_opts_t *o, const char *prog,
                           FILE *err)
{
    long v;

    switch (c) {
    case 'b': case 'e': case 'i': {
        size_t *dst = c == 'b' ? &o->min_bytes : c == 'e' ? &o->max_bytes : &o->step_bytes;
        if (ptool_parse_size(arg, PTOOL_SIZE_LIMIT, dst) != 0)
            return ptool_perr(err, prog, "invalid size '%s' (0 .. 4G, suffix K/M/G)", arg);
        return PTOOL_COLL_RUN;   /* -i alone selects adding: ptool_coll_parse */
    }
    case 'f':
        /* as in nccl-tests, a factor of 0 or 1 means "add -i bytes" */
        if (ptool_parse_long(arg, 0, 1024, &v) != 0)
            return ptool_perr(err, prog, "invalid --stepfactor '%s' (2 .. 1024; 0 or 1: add -i)",
                              arg);
        o->step_factor = v > 1 ? (int)v : 0;
        return PTOOL_COLL_RUN;
    case 'd':
        if (strcmp(arg, "all") == 0) {    /* nccl-tests: every type in turn */
            o->dtype = -1;
            return PTOOL_COLL_RUN;
        }
        if (ptool_parse_type(arg, &o->dtype) != 0)
            return ptool_unknown(err, prog, "datatype", arg, ptool_type_names, PTOOL_T_N,
                                 ptool_type_alias, PTOOL_NALIAS, ", or all");
        return PTOOL_COLL_RUN;
    case 'o':
        if (strcmp(arg, "all") == 0) {    /* nccl-tests: every operator in turn */
            o->op = -1;
            return PTOOL_COLL_RUN;
        }
        if ((o->op = ptool_lookup(arg, ptool_op_names, PTOOL_O_N)) < 0)
            return ptool_unknown(err, prog, "op", arg, ptool_op_names, PTOOL_O_N, NULL, 0,
                                 ", or all (nccl-tests' mulsum is not offered)");
        return PTOOL_COLL_RUN;
    case 'r': case 'n': case 'w': case 'c': case 'I': case 'N': {
        /* -r -1: every rank as the root in turn (nccl-tests); -N 0: sweep forever */
        long lo = c == 'n' ? 1 : c == 'r' ? -1 : 0, hi = c == 'I' ? 2 : 100000000L;
        if (ptool_parse_long(arg, lo, hi, &v) != 0) {
            char fmt[80];   /* name the flag and its range */
            snprintf(fmt, sizeof fmt, "-%c '%%s': expected a whole number from %ld to %ld", c,
                     lo, hi);
            return ptool_perr(err, prog, fmt, arg);
        }
        if (c == 'r') o->root = (int)v;
        else if (c == 'n') o->iters = v;
        else if (c == 'w') o->warmup = v;
        else if (c == 'c') o->check = (int)v;
        else if (c == 'N') o->run_cycles = v;
        else o->inplace = (int)v;
        return PTOOL_COLL_RUN;
    }
    case 'a': o->algo = arg; return PTOOL_COLL_RUN;
    case 'H': o->hash = 1; return PTOOL_COLL_RUN;
    case 'J': o->json_path = arg; return PTOOL_COLL_RUN;
    case 'h': return PTOOL_COLL_HELP;
    default:  return ptool_nccl_only(c, arg, prog, err);
    }
}

int ptool_coll_parse(int argc, char **argv, ptool_coll_opts_t *o, const char *prog, FILE *err)
{
    static const struct option own[] = {
        {"minbytes", required_argument, NULL, 'b'}, {"maxbytes", required_argument, NULL, 'e'},
        {"stepfactor", required_argument, NULL, 'f'}, {"stepbytes", required_argument, NULL, 'i'},
        {"datatype", required_argument, NULL, 'd'}, {"op", required_argument, NULL, 'o'},
        {"root", required_argument, NULL, 'r'}, {"iters", required_argument, NULL, 'n'},
        {"warmup_iters", required_argument, NULL, 'w'}, {"check", required_argument, NULL, 'c'},
        {"algo", required_argument, NULL, 'a'}, {"inplace", required_argument, NULL, 'I'},
        {"hash", no_argument, NULL, 'H'}, {"json", required_argument, NULL, 'J'},
        {"help", no_argument, NULL, 'h'}, {"run_cycles", required_argument, NULL, 'N'},
        {"output_file", required_argument, NULL, 'J'}};   /* (nccl-tests' name of -J) */
    enum { NOWN = sizeof own / sizeof own[0] };
    /* then nccl-tests' options taken with their neutral value only, from
     * their table, long names and letters alike */
    struct option longs[NOWN + PTOOL_N_NCCL_ONLY + 1];
    char shorts[64 + 2 * PTOOL_N_NCCL_ONLY] = ":b:e:f:i:d:o:r:n:w:c:a:I:HJ:hN:";
    int c, rc, f_given = 0, i_given = 0;

    memset(o, 0, sizeof *o);
    o->coll = -1;
    o->min_bytes = 8;
    o->max_bytes = (size_t)64 << 20;
    o->step_factor = 2;
    o->step_bytes = (size_t)1 << 20;
    o->dtype = PTOOL_T_FLOAT;
    o->iters = 20;
    o->warmup = 5;
    o->run_cycles = 1;
    o->inplace = 2;
    o->prog = prog;
    memcpy(longs, own, sizeof own);
    for (size_t i = 0; i < PTOOL_N_NCCL_ONLY; i++) {
        const ptool_nccl_only_t *q = &ptool_nccl_only_opts[i];
        longs[NOWN + i] = (struct option){q->name, required_argument, NULL, q->c};
        if (q->c < 256)
            snprintf(shorts + strlen(shorts), sizeof shorts - strlen(shorts), "%c:", q->c);
    }
    longs[NOWN + PTOOL_N_NCCL_ONLY] = (struct option){NULL, 0, NULL, 0};
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, shorts, longs, NULL)) != -1) {
        if (c == '?' || c == ':')
            return ptool_perr(err, prog, c == '?' ? "unknown option '%s'" :
                              "option '%s' needs a value", argv[optind - 1]);
        if ((rc = ptool_parse_opt(c, optarg, o, prog, err)) != PTOOL_COLL_RUN)
            return rc;
        f_given |= c == 'f';
        i_given |= c == 'i';
    }
    /* nccl-tests multiplies whenever the factor is above 1, whatever the
     * order of -f and -i; -i without -f adds (this benchmark's factor
     * defaults to 2, nccl-tests' to 1) */
    if (i_given && !f_given)
        o->step_factor = 0;
    if (optind >= argc)
        return ptool_perr(err, prog, "%s", "which collective? (e.g. allreduce)");
    if ((o->coll = ptool_lookup(argv[optind], ptool_coll_names, PTOOL_C_N)) < 0)
        return ptool_unknown(err, prog, "collective", argv[optind], ptool_coll_names, PTOOL_C_N,
                             NULL, 0, NULL);
    if (optind + 1 < argc)
        return ptool_perr(err, prog, "unexpected argument '%s'", argv[optind + 1]);
    if (o->min_bytes > o->max_bytes)
        return ptool_perr(err, prog, "%s", "-b is larger than -e");
    if (o->step_factor == 0 && o->step_bytes == 0)
        return ptool_perr(err, prog, "%s", "-i 0 would never reach -e");
    if (o->op == PTOOL_O_AVG && ptool_is_reduction(o->coll) && o->dtype >= 0 &&
        !ptool_is_float(o->dtype))
        return ptool_perr(err, prog, "-o avg needs a floating type (-d half, bfloat16, float "
                          "or double), not %s", ptool_coll_type_name(o->dtype));
    return PTOOL_COLL_RUN;
}

/* ------------------------------------------------------------- element I/O */

static uint16_t ptool_f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int exp = (int)((x >> 23) & 0xff) - 127 + 15;
    if (((x >> 23) & 0xff) == 0xff)
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
    if (exp >= 31)
        return (uint16_t)(sign | 0x7c00u);
    if (exp <= 0) {          /* subnormal half (or zero) */
        if (exp < -10)
            return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp), h = mant >> shift;
        uint32_t rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        h += rest > half || (rest == half && (h & 1));
        return (uint16_t)(sign | h);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13), rest = mant & 0x1fffu;
    h += rest > 0x1000u || (rest == 0x1000u && (h & 1));
    return (uint16_t)h;
}

static float ptool_h2f(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu, x;
    float f;
    if (exp == 0) {
        f = (float)mant / 16777216.0f;     /* mant * 2^-24 */
        return sign ? -f : f;
    }
    x = exp == 31 ? sign | 0x7f800000u | (mant << 13)
                  : sign | ((exp - 15 + 127) << 23) | (mant << 13);
    memcpy(&f, &x, 4);
    return f;
}

static void ptool_store(void *buf, size_t i, int t, double v)
{
    char *p = (char *)buf + i * ptool_type_size[t];
    switch (t) {
    case PTOOL_T_INT8:   { int8_t x = (int8_t)v; memcpy(p, &x, 1); break; }
    case PTOOL_T_UINT8:  { uint8_t x = (uint8_t)v; memcpy(p, &x, 1); break; }
    case PTOOL_T_INT32:  { int32_t x = (int32_t)v; memcpy(p, &x, 4); break; }
    case PTOOL_T_UINT32: { uint32_t x = (uint32_t)v; memcpy(p, &x, 4); break; }
    case PTOOL_T_INT64:  { int64_t x = (int64_t)v; memcpy(p, &x, 8); break; }
    case PTOOL_T_UINT64: { uint64_t x = (uint64_t)v; memcpy(p, &x, 8); break; }
    case PTOOL_T_HALF:   { uint16_t x = ptool_f2h((float)v); memcpy(p, &x, 2); break; }
    case PTOOL_T_BFLOAT16: {
        float f = (float)v;
        uint32_t u;
        uint16_t x;
        memcpy(&u, &f, 4);
        x = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
        memcpy(p, &x, 2);
        break;
    }
    case PTOOL_T_FLOAT:  { float x = (float)v; memcpy(p, &x, 4); break; }
    default:             memcpy(p, &v, 8); break;
    }
}

static double ptool_load(const void *buf, size_t i, int t)
{
    const char *p = (const char *)buf + i * ptool_type_size[t];
    switch (t) {
    case PTOOL_T_INT8:   { int8_t x; memcpy(&x, p, 1); return x; }
    case PTOOL_T_UINT8:  { uint8_t x; memcpy(&x, p, 1); return x; }
    case PTOOL_T_INT32:  { int32_t x; memcpy(&x, p, 4); return x; }
    case PTOOL_T_UINT32: { uint32_t x; memcpy(&x, p, 4); return x; }
    case PTOOL_T_INT64:  { int64_t x; memcpy(&x, p, 8); return (double)x; }
    case PTOOL_T_UINT64: { uint64_t x; memcpy(&x, p, 8); return (double)x; }
    case PTOOL_T_HALF:   { uint16_t x; memcpy(&x, p, 2); return ptool_h2f(x); }
    case PTOOL_T_BFLOAT16: {
        uint16_t x;
        uint32_t u;
        float f;
        memcpy(&x, p, 2);
        u = (uint32_t)x << 16;
        memcpy(&f, &u, 4);
        return f;
    }
    case PTOOL_T_FLOAT:  { float x; memcpy(&x, p, 4); return x; }
    default:             { double x; memcpy(&x, p, 8); return x; }
    }
}

/* ----------------------------------------------------------- check values */

/* Input element i of rank r: small integers, so that every partial sum or
 * product is exact in every type (8-bit types included, up to 16 ranks). */
static double ptool_val(int r, size_t i, int op)
{
    if (op == PTOOL_O_PROD)
        return (r + i) % 5 == 0 ? 2 : 1;
    return (double)(((size_t)r * 5 + i * 3 + 1) % 8);
}

static double ptool_expect(int n, size_t i, int op)
{
    double acc = ptool_val(0, i, op);
    for (int r = 1; r < n; r++) {
        double v = ptool_val(r, i, op);
        switch (op) {
        case PTOOL_O_PROD: acc *= v; break;
        case PTOOL_O_MAX:  acc = v > acc ? v : acc; break;
        case PTOOL_O_MIN:  acc = v < acc ? v : acc; break;
        default:           acc += v; break;
        }
    }
    return op == PTOOL_O_AVG ? acc / n : acc;
}

static int ptool_is_float(int t)
{
    return t == PTOOL_T_HALF || t == PTOOL_T_BFLOAT16 || t == PTOOL_T_FLOAT ||
           t == PTOOL_T_DOUBLE;
}

static int ptool_same(double got, double want, int t, int op)
{
    double tol;
    if (!ptool_is_float(t))
        return op == PTOOL_O_AVG ? fabs(got - want) <= 1.0 : got == want;
    if (op != PTOOL_O_AVG)
        return got == want;    /* small integers: exact in every float type */
    tol = t == PTOOL_T_DOUBLE ? 1e-12 : t == PTOOL_T_FLOAT ? 1e-6 : 1e-2;
    return fabs(got - want) <= tol * (fabs(want) > 1 ? fabs(want) : 1);
}

/* ------------------------------------------------------------ layout */

typedef struct {
    const ptool_coll_opts_t    *o;
    const ptool_coll_backend_t *be;
    int     n, rank, es;
    size_t  count;        /* per the API's meaning */
    size_t  selems;       /* input elements this rank holds */
    size_t  relems;       /* output elements */
    size_t  size;         /* nccl-tests bytes */
    char   *sbuf, *rbuf;
    size_t  cap;          /* bytes of each buffer */
    size_t *vcounts, *vdispls;
    FILE   *json;
    int     json_rows;
    double  bw_sum;
    int     bw_n;
    double  wrong_total;  /* nccl-tests' "Out of bounds values": tests (size x placement)
                             that failed, counted once per rank that saw wrong values */
} ptool_cctx_t;

/* Blocks of `count` in the nccl-tests size of the collective. */
static int ptool_nblocks(int coll, int n)
{
    return coll == PTOOL_C_ALLREDUCE || coll == PTOOL_C_BCAST || coll == PTOOL_C_REDUCE ? 1 : n;
}

static double ptool_busbw_factor(int coll, int n)
{
    switch (coll) {
    case PTOOL_C_ALLREDUCE: return 2.0 * (n - 1) / n;
    case PTOOL_C_BCAST: case PTOOL_C_REDUCE: return 1.0;
    case PTOOL_C_BARRIER: return 0.0;
    default: return (double)(n - 1) / n;
    }
}

static void ptool_layout(ptool_cctx_t *c, size_t bytes)
{
    int coll = c->o->coll, n = c->n;
    size_t nb = (size_t)ptool_nblocks(coll, n), cnt = bytes / (size_t)c->es / nb;
    /* nccl-tests cuts the per-rank block of the n-block collectives down to
     * whole 16-byte units (so 100 B of floats on 4 ranks is 4 per rank, 64 B),
     * the vector collectives to whole elements only; the size and count
     * columns must show the same numbers for the same -b/-e */
    if (nb > 1)
        cnt &= ~(size_t)(16 / c->es - 1);
    c->count = cnt;
    c->size = cnt * nb * (size_t)c->es;
    switch (coll) {
    case PTOOL_C_ALLGATHER: case PTOOL_C_GATHER:
        c->selems = cnt; c->relems = cnt * (size_t)n; break;
    case PTOOL_C_REDUCE_SCATTER: case PTOOL_C_SCATTER:
        c->selems = cnt * (size_t)n; c->relems = cnt; break;
    case PTOOL_C_ALLTOALL: case PTOOL_C_ALLTOALLV:
        c->selems = c->relems = cnt * (size_t)n; break;
    case PTOOL_C_BARRIER:
        c->selems = c->relems = c->count = c->size = 0; break;
    default:
        c->selems = c->relems = cnt; break;
    }
    for (int i = 0; c->vcounts && i < n; i++) {
        c->vcounts[i] = cnt;
        c->vdispls[i] = (size_t)i * cnt;
    }
}

/* The call for this size; ip: in place. */
static ptool_coll_call_t ptool_call(const ptool_cctx_t *c, int ip)
{
    ptool_coll_call_t k = {.coll = c->o->coll, .dtype = c->o->dtype, .op = c->o->op,
                           .root = c->o->root, .sbuf = c->sbuf, .rbuf = c->rbuf,
                           .count = c->count, .counts = c->vcounts, .displs = c->vdispls};
    int rooted = ptool_is_rooted(k.coll);
    if (k.coll == PTOOL_C_BCAST)
        k.sbuf = k.rbuf;
    else if (ip && (!rooted || c->rank == k.root))
        k.sbuf = k.rbuf;
    return k;
}

/* Where this rank's input lives for the call and at which element of that
 * buffer input element 0 sits. */
static char *ptool_input(const ptool_cctx_t *c, const ptool_coll_call_t *k, size_t *first)
{
    *first = 0;
    if (k->sbuf == k->rbuf && (k->coll == PTOOL_C_ALLGATHER || k->coll == PTOOL_C_GATHER))
        *first = (size_t)c->rank * c->count;
    return k->coll == PTOOL_C_BCAST ? c->rbuf : (char *)k->sbuf;
}

static void ptool_fill(ptool_cctx_t *c, const ptool_coll_call_t *k)
{
    size_t first, nin = c->selems;
    char *in = ptool_input(c, k, &first);
    int src = c->rank;
    memset(c->rbuf, 0xa5, c->cap);            /* poison: wrong if left untouched */
    if (k->coll == PTOOL_C_BCAST) {
        if (c->rank != k->root)
            return;
        nin = c->relems;
    }
    if (k->coll == PTOOL_C_SCATTER && c->rank != k->root)
        return;
    for (size_t i = 0; i < nin; i++)
        ptool_store(in, first + i, c->o->dtype, ptool_val(src, i, c->o->op));
}

/* Expected value of output element i on this rank; NAN-free double. */
static double ptool_want(const ptool_cctx_t *c, const ptool_coll_call_t *k, size_t i)
{
    int n = c->n, op = c->o->op;
    size_t cnt = c->count;
    switch (k->coll) {
    case PTOOL_C_ALLREDUCE: case PTOOL_C_REDUCE: return ptool_expect(n, i, op);
    case PTOOL_C_REDUCE_SCATTER: return ptool_expect(n, (size_t)c->rank * cnt + i, op);
    case PTOOL_C_ALLGATHER: case PTOOL_C_GATHER: return ptool_val((int)(i / cnt), i % cnt, op);
    case PTOOL_C_ALLTOALL: case PTOOL_C_ALLTOALLV:
        return ptool_val((int)(i / cnt), (size_t)c->rank * cnt + i % cnt, op);
    case PTOOL_C_BCAST: return ptool_val(k->root, i, op);
    default: return ptool_val(k->root, (size_t)c->rank * cnt + i, op);   /* scatter */
    }
}

/* Output elements this rank checks, and the first one's position. */
static size_t ptool_outputs(const ptool_cctx_t *c, const ptool_coll_call_t *k, size_t *first)
{
    *first = 0;
    if ((k->coll == PTOOL_C_REDUCE || k->coll == PTOOL_C_GATHER) && c->rank != k->root)
        return 0;
    if (k->coll == PTOOL_C_SCATTER && k->sbuf == k->rbuf && c->rank == k->root)
        *first = (size_t)c->rank * c->count;
    return c->relems;
}

static size_t ptool_count_wrong(const ptool_cctx_t *c, const ptool_coll_call_t *k)
{
    size_t first, nout = ptool_outputs(c, k, &first), wrong = 0;
    for (size_t i = 0; i < nout; i++)
        wrong += !ptool_same(ptool_load(c->rbuf, first + i, c->o->dtype), ptool_want(c, k, i),
                             c->o->dtype, c->o->op);
    return wrong;
}

/* FNV-1a over this rank's output, mixed with the rank. */
static uint64_t ptool_hash(const ptool_cctx_t *c, const ptool_coll_call_t *k)
{
    size_t first, nout = ptool_outputs(c, k, &first);
    const unsigned char *p = (const unsigned char *)c->rbuf + first * (size_t)c->es;
    uint64_t h = 1469598103934665603ull ^ (uint64_t)c->rank;
    for (size_t i = 0; i < nout * (size_t)c->es; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* ------------------------------------------------------------ measuring */

#define PTOOL_CALL(be, expr, what)             \
    do {                                       \
        int ptool_rc_ = (expr);                \
        if (ptool_rc_ != 0)                    \
            (be)->fail((what), ptool_rc_);     \
    } while (0)

typedef struct {
    double time_us, algbw, busbw, wrong;    /* wrong < 0: not checked */
    double bad_ranks;                       /* ranks that saw wrong values */
    double hash[4];
    int    unsupported;
} ptool_cres_t;

static void ptool_measure(ptool_cctx_t *c, int ip, ptool_cres_t *res)
{
    const ptool_coll_backend_t *be = c->be;
    ptool_coll_call_t k = ptool_call(c, ip);
    double t0, t, wr[2] = {0, 0};
    int rc;

    memset(res, 0, sizeof *res);
    res->wrong = -1;
    /* avg of an integer type: only reached through -o all / -d all (the
     * parser refuses the pair); N/A like a combination a library lacks */
    if (k.op == PTOOL_O_AVG && ptool_is_reduction(k.coll) && !ptool_is_float(k.dtype)) {
        res->unsupported = 1;
        return;
    }
    ptool_fill(c, &k);
    rc = be->run(&k);
    if (rc == PTOOL_UNSUPPORTED) {
        res->unsupported = 1;
        return;
    }
    PTOOL_CALL(be, rc, ptool_coll_name(k.coll));
    for (long i = 1; i < c->o->warmup; i++)
        PTOOL_CALL(be, be->run(&k), ptool_coll_name(k.coll));
    PTOOL_CALL(be, be->barrier(), "barrier");
    t0 = be->wtime();
    for (long i = 0; i < c->o->iters; i++)
        PTOOL_CALL(be, be->run(&k), ptool_coll_name(k.coll));
    t = (be->wtime() - t0) / (double)c->o->iters;
    for (int v = 0; v < c->o->check || (v == 0 && c->o->hash); v++) {
        ptool_fill(c, &k);
        PTOOL_CALL(be, be->run(&k), ptool_coll_name(k.coll));
        if (!c->o->check)
            continue;
        /* as nccl-tests: #wrong is the count of the first check that found
         * any (over all ranks), not a sum over the -c repetitions */
        wr[0] = (double)ptool_count_wrong(c, &k);
        wr[1] = wr[0] > 0;
        PTOOL_CALL(be, be->sum_doubles(wr, 2), "wrong-value count");
        if (wr[0] > 0)
            break;
    }
    if (c->o->hash) {
        uint64_t h = ptool_hash(c, &k);
        for (int j = 0; j < 4; j++)
            res->hash[j] = (double)((h >> (16 * j)) & 0xffff);
        PTOOL_CALL(be, be->sum_doubles(res->hash, 4), "hash sum");
    }
    PTOOL_CALL(be, be->sum_doubles(&t, 1), "time average");
    res->time_us = t / c->n * 1e6;
    res->algbw = res->time_us > 0 ? (double)c->size / res->time_us / 1e3 : 0;
    res->busbw = res->algbw * ptool_busbw_factor(k.coll, c->n);
    if (c->o->check) {
        res->wrong = wr[0];
        res->bad_ranks = wr[1];
    }
}

/* ------------------------------------------------------------ output */

/* v in a column of `width` characters the way nccl-tests fills its cells:
 * two decimals while they fit, then one, then none, then an exponent, so a
 * cell never widens the row (time: 7, algbw / busbw: 6) */
static void ptool_cell(double v, int width, char *out, size_t len)
{
    for (int prec = 2; prec >= 0; prec--)
        if (snprintf(out, len, "%*.*f", width, prec, v) <= width)
            return;
    snprintf(out, len, "%*.*e", width, width >= 7 ? 1 : 0, v);
}

static void ptool_print_res(const ptool_cres_t *r)
{
    char ts[40], as[40], bs[40], ws[40];
    if (r->unsupported) {
        printf("  %7s  %6s  %6s  %6s", "N/A", "N/A", "N/A", "N/A");
        return;
    }
    ptool_cell(r->time_us, 7, ts, sizeof ts);
    ptool_cell(r->algbw, 6, as, sizeof as);
    ptool_cell(r->busbw, 6, bs, sizeof bs);
    if (r->wrong < 0)
        snprintf(ws, sizeof ws, "N/A");
    else
        snprintf(ws, sizeof ws, "%g", r->wrong);   /* nccl-tests prints the count with %g */
    printf("  %s  %s  %s  %6s", ts, as, bs, ws);
}

static void ptool_print_header(const ptool_cctx_t *c)
{
    const ptool_coll_opts_t *o = c->o;
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    printf("# %s %s: %s %s, %d ranks on %s\n", o->prog, ptool_coll_name(o->coll), c->be->name,
           c->be->version, c->n, host);
    /* nccl-tests' second and third lines, field for field (one thread and
     * one "GPU" per rank, no aggregation, graphs or misalignment), plus the
     * algorithm at the end */
    printf("# Collective test starting: %s %s\n", o->prog, ptool_coll_name(o->coll));
    printf("# nThread 1 nGpus 1 minBytes %zu maxBytes %zu step: %zu(%s) warmup iters: %ld "
           "iters: %ld agg iters: 1 validation: %d graph: 0 unalign: 0 algorithm: %s\n",
           o->min_bytes, o->max_bytes,
           o->step_factor ? (size_t)o->step_factor : o->step_bytes,
           o->step_factor ? "factor" : "bytes", o->warmup, o->iters, o->check,
           o->algo ? o->algo : "auto");
    printf("#\n");
    /* the two group labels over the same character positions as nccl-tests' */
    printf("#%51s%11s%-35s%s\n", "", "", "out-of-place", "in-place");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size",
           "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
           "busbw", "#wrong");
    printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)",
           "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
           "");
}

static void ptool_json_res(FILE *f, const char *key, const ptool_cres_t *r)
{
    fprintf(f, "\"%s\": ", key);
    if (r->unsupported) {
        fprintf(f, "null");
        return;
    }
    fprintf(f, "{\"time_us\": %.3f, \"algbw_GBps\": %.4f, \"busbw_GBps\": %.4f, \"wrong\": ",
            r->time_us, r->algbw, r->busbw);
    if (r->wrong < 0)
        fprintf(f, "null}");
    else
        fprintf(f, "%.0f}", r->wrong);
}

/* The redop and root columns: "none" and -1 where the collective has none. */
static const char *ptool_row_op(const ptool_coll_opts_t *o)
{
    return ptool_is_reduction(o->coll) ? ptool_coll_op_name(o->op) : "none";
}

static int ptool_row_root(const ptool_coll_opts_t *o)
{
    return ptool_is_rooted(o->coll) ? o->root : -1;
}

static void ptool_row(ptool_cctx_t *c, const ptool_cres_t res[2], const int run[2])
{
    int coll = c->o->coll;
    const ptool_cres_t skip = {.unsupported = 1};
    printf("  %10zu  %12zu  %8s  %6s  %6d", c->size, c->count, ptool_coll_type_name(c->o->dtype),
           ptool_row_op(c->o), ptool_row_root(c->o));
    for (int ip = 0; ip < 2; ip++) {
        ptool_print_res(run[ip] ? &res[ip] : &skip);
        if (run[ip] && !res[ip].unsupported) {
            c->bw_sum += res[ip].busbw;
            c->bw_n++;
            c->wrong_total += res[ip].bad_ranks;
        }
    }
    printf("\n");
    if (c->o->hash)
        for (int ip = 0; ip < 2; ip++)
            if (run[ip] && !res[ip].unsupported)
                printf("# hash %s %s size %zu: %04x%04x%04x%04x\n", ptool_coll_name(coll),
                       ip ? "in-place" : "out-of-place", c->size,
                       (unsigned)fmod(res[ip].hash[3], 65536.0),
                       (unsigned)fmod(res[ip].hash[2], 65536.0),
                       (unsigned)fmod(res[ip].hash[1], 65536.0),
                       (unsigned)fmod(res[ip].hash[0], 65536.0));
    fflush(stdout);
    if (c->json) {
        /* type, redop and root per row: -d all / -o all / -r -1 vary them */
        fprintf(c->json, "%s\n    {\"size\": %zu, \"count\": %zu, \"type\": \"%s\", "
                "\"redop\": \"%s\", \"root\": %d, ", c->json_rows++ ? "," : "", c->size,
                c->count, ptool_coll_type_name(c->o->dtype), ptool_row_op(c->o),
                ptool_row_root(c->o));
        ptool_json_res(c->json, "out_of_place", run[0] ? &res[0] : &skip);
        fprintf(c->json, ", ");
        ptool_json_res(c->json, "in_place", run[1] ? &res[1] : &skip);
        fprintf(c->json, "}");
    }
}

static int ptool_alloc(ptool_cctx_t *c)
{
    const ptool_coll_opts_t *o = c->o;
    size_t maxb = o->max_bytes;
    /* every layout fits in the largest size (n blocks of size / n each), for
     * every element size (-d all) */
    c->cap = (maxb / 8 + 1) * 8;
    if (c->cap < 64)
        c->cap = 64;
    c->sbuf = aligned_alloc(4096, (c->cap + 4095) / 4096 * 4096);
    c->rbuf = aligned_alloc(4096, (c->cap + 4095) / 4096 * 4096);
    c->vcounts = calloc((size_t)c->n, sizeof(size_t));
    c->vdispls = calloc((size_t)c->n, sizeof(size_t));
    if (!c->sbuf || !c->rbuf || !c->vcounts || !c->vdispls)
        return -1;
    memset(c->sbuf, 0, c->cap);
    memset(c->rbuf, 0, c->cap);
    return 0;
}

static size_t ptool_next(const ptool_coll_opts_t *o, size_t b)
{
    if (o->step_factor)
        return b ? b * (size_t)o->step_factor : 1;
    return b + o->step_bytes;
}

static void ptool_json_open(ptool_cctx_t *c)
{
    const ptool_coll_opts_t *o = c->o;
    if (!o->json_path || c->rank != 0)
        return;
    if (!(c->json = fopen(o->json_path, "w"))) {
        fprintf(stderr, "%s: cannot write --json file '%s': %s\n", o->prog, o->json_path,
                strerror(errno));
        return;
    }
    fprintf(c->json, "{\"benchmark\": \"%s\", \"library\": \"%s\", \"version\": \"%s\", "
            "\"ranks\": %d, \"type\": \"%s\", \"op\": \"%s\", \"root\": %d, \"algo\": \"%s\", "
            "\"iters\": %ld, \"warmup\": %ld, \"busbw_factor\": %.6f, \"results\": [",
            ptool_coll_name(o->coll), c->be->name, c->be->version, c->n,
            o->dtype < 0 ? "all" : ptool_coll_type_name(o->dtype),
            o->op < 0 && ptool_is_reduction(o->coll) ? "all" : ptool_row_op(o),
            ptool_row_root(o),
            o->algo ? o->algo : "auto", o->iters, o->warmup, ptool_busbw_factor(o->coll, c->n));
}

/* One sweep of the sizes for the type / op / root of c->o (-N: cycles). */
static void ptool_sweep(ptool_cctx_t *c)
{
    const ptool_coll_opts_t *o = c->o;
    size_t b = o->min_bytes, last_count = SIZE_MAX;

    c->es = (int)ptool_type_size[o->dtype];
    for (;;) {
        ptool_cres_t res[2];
        int run[2] = {o->inplace != 1, o->inplace != 0};
        ptool_layout(c, b);
        if (c->count != last_count || o->coll == PTOOL_C_BARRIER) {
            /* sizes that round to the count just measured (-b 0: 0, 1, 2, 4 bytes
             * of floats are all 0 elements) would repeat its row */
            for (int ip = 0; ip < 2; ip++)
                if (run[ip])
                    ptool_measure(c, ip, &res[ip]);
            if (c->rank == 0)
                ptool_row(c, res, run);
            last_count = c->count;
        }
        if (o->coll == PTOOL_C_BARRIER || b >= o->max_bytes)
            break;
        b = ptool_next(o, b);
        if (b > o->max_bytes)
            break;
    }
}

int ptool_coll_run(const ptool_coll_opts_t *o, const ptool_coll_backend_t *be)
{
    ptool_cctx_t c = {.o = o, .be = be, .n = be->size, .rank = be->rank,
                      .es = (int)ptool_type_size[o->dtype >= 0 ? o->dtype : PTOOL_T_DOUBLE]};
    ptool_coll_opts_t cur = *o;
    /* -d all, -o all, -r -1 run every type, then (reductions only) every
     * operator, then (rooted collectives only) every root, in nccl-tests'
     * nesting and order; one table, one footer */
    static const int all_types[PTOOL_T_N] = {
        PTOOL_T_INT8, PTOOL_T_UINT8, PTOOL_T_INT32, PTOOL_T_UINT32, PTOOL_T_INT64,
        PTOOL_T_UINT64, PTOOL_T_HALF, PTOOL_T_FLOAT, PTOOL_T_DOUBLE, PTOOL_T_BFLOAT16};
    int nt = o->dtype < 0 ? PTOOL_T_N : 1;
    int nop = o->op < 0 && ptool_is_reduction(o->coll) ? PTOOL_O_N : 1;
    int nroot = o->root < 0 && ptool_is_rooted(o->coll) ? be->size : 1;

    if (ptool_is_rooted(o->coll) && o->root >= c.n) {
        if (c.rank == 0)
            fprintf(stderr, "%s: root %d is not a rank of this %d-rank job\n", o->prog, o->root,
                    c.n);
        return 2;
    }
    ptool_json_open(&c);
    {   /* rank 0 alone opens the file: every rank learns whether it could */
        double bad = c.rank == 0 && o->json_path && !c.json;
        PTOOL_CALL(be, be->sum_doubles(&bad, 1), "--json check");
        if (bad > 0)
            return 2;
    }
    if (ptool_alloc(&c) != 0) {
        char why[160];
        snprintf(why, sizeof why, "rank %d cannot allocate two buffers of %zu bytes (-e %zu): "
                 "out of memory", c.rank, c.cap, o->max_bytes);
        be->fail(why, 0);
    }
    if (c.rank == 0)
        ptool_print_header(&c);
    c.o = &cur;
    for (int ti = 0; ti < nt; ti++) {
        cur.dtype = o->dtype < 0 ? all_types[ti] : o->dtype;
        for (int oi = 0; oi < nop; oi++) {
            /* a collective without an operator runs once, on sum's inputs */
            cur.op = nop > 1 ? oi : o->op < 0 ? PTOOL_O_SUM : o->op;
            for (int ri = 0; ri < nroot; ri++) {
                cur.root = nroot > 1 ? ri : o->root < 0 ? 0 : o->root;
                for (long cy = 0; o->run_cycles == 0 || cy < o->run_cycles; cy++)
                    ptool_sweep(&c);
            }
        }
    }
    c.o = o;
    if (c.rank == 0) {
        printf("# Out of bounds values : %.0f %s\n", c.wrong_total,
               c.wrong_total > 0 ? "FAILED" : "OK");
        printf("# Avg bus bandwidth    : %g \n#\n", c.bw_n ? c.bw_sum / c.bw_n : 0.0);
        /* nccl-tests' closing lines: scripts look for them to know the run ended */
        printf("# Collective test concluded: %s %s\n#\n", o->prog, ptool_coll_name(o->coll));
        fflush(stdout);
    }
    if (c.json) {
        fprintf(c.json, "\n  ], \"out_of_bounds\": %.0f, \"avg_busbw_GBps\": %.4f}\n",
                c.wrong_total, c.bw_n ? c.bw_sum / c.bw_n : 0.0);
        fclose(c.json);
    }
    free(c.sbuf);
    free(c.rbuf);
    free(c.vcounts);
    free(c.vdispls);
    /* every rank returns the same verdict: the footer total is rank 0's sum */
    {
        double w = c.wrong_total;
        PTOOL_CALL(be, be->sum_doubles(&w, 1), "verdict");
        return w > 0 ? 1 : 0;
    }
}
