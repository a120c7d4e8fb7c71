/*
 * cma-bw -- what one copy between two processes of one host costs: a
 * process_vm_readv of another process's fresh data (the direct reads of
 * coll/shm.c) against a memcpy out of a shared mapping (the area of
 * coll/shm_small.c).
 *
 *   cma-bw [-s BYTES] [-c CHUNK] [-i ITERS] [-r READER_CPU] [-w WRITER_CPU]
 *
 * A writer process fills its private buffer and a shared one with a new byte
 * each round (so the data sits in the writer's cache, as a peer's freshly
 * computed input does), then the reader copies it out, alternating the two
 * ways, and checks a byte. Prints the time per copy and GB/s of each.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    _Atomic int go;      /* round the writer should fill (-1: exit) */
    _Atomic int done;    /* round the writer has filled */
    uint64_t    addr;    /* the writer's private buffer */
} cma_flags_t;

static double cma_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void cma_pin(int cpu)
{
    cpu_set_t set;
    if (cpu < 0)
        return;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        perror("cma-bw: sched_setaffinity");
}

static void cma_writer(cma_flags_t *f, char *shared, size_t n, int cpu)
{
    char *buf = malloc(n);
    if (!buf)
        _exit(1);
    cma_pin(cpu);
    memset(buf, 0, n);
    f->addr = (uint64_t)(uintptr_t)buf;
    atomic_store(&f->done, 0);
    for (int round = 1;; round++) {
        int go;
        while ((go = atomic_load(&f->go)) != round)
            if (go < 0)
                _exit(0);
        memset(buf, round & 0xff, n);
        memset(shared, round & 0xff, n);
        atomic_store(&f->done, round);
    }
}

/* A size with an optional K, M or G suffix (powers of 1024). */
static size_t cma_size(const char *arg)
{
    char *end;
    size_t v = strtoull(arg, &end, 0);
    switch (*end) {
    case 'K': case 'k': return v << 10;
    case 'M': case 'm': return v << 20;
    case 'G': case 'g': return v << 30;
    default: return *end ? 0 : v;
    }
}

static int cma_read(pid_t pid, uint64_t addr, char *dst, size_t n, size_t chunk)
{
    for (size_t o = 0; o < n; o += chunk) {
        size_t m = n - o < chunk ? n - o : chunk;
        struct iovec l = {dst + o, m}, r = {(void *)(uintptr_t)(addr + o), m};
        if (process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)m) {
            perror("cma-bw: process_vm_readv");
            return -1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    size_t n = (size_t)1 << 20, chunk = (size_t)128 << 10;
    int iters = 300, rcpu = -1, wcpu = -1, opt;
    while ((opt = getopt(argc, argv, "s:c:i:r:w:h")) != -1) {
        switch (opt) {
        case 's': n = cma_size(optarg); break;
        case 'c': chunk = cma_size(optarg); break;
        case 'i': iters = atoi(optarg); break;
        case 'r': rcpu = atoi(optarg); break;
        case 'w': wcpu = atoi(optarg); break;
        default:
            fprintf(stderr, "usage: cma-bw [-s BYTES] [-c CHUNK] [-i ITERS] [-r READER_CPU] "
                            "[-w WRITER_CPU]\n");
            return opt == 'h' ? 0 : 2;
        }
    }
    if (n == 0 || chunk == 0 || iters < 2) {
        fprintf(stderr, "cma-bw: -s and -c need sizes > 0 (suffixes K, M, G), -i at least 2\n");
        return 2;
    }
    cma_flags_t *f = mmap(NULL, sizeof *f, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                          -1, 0);
    char *shared = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    char *dst = malloc(n);
    if (f == MAP_FAILED || shared == MAP_FAILED || !dst) {
        perror("cma-bw: memory");
        return 1;
    }
    atomic_store(&f->done, -1);
    pid_t pid = fork();
    if (pid < 0) {
        perror("cma-bw: fork");
        return 1;
    }
    if (pid == 0)
        cma_writer(f, shared, n, wcpu);
    cma_pin(rcpu);
    memset(dst, 0, n);
    while (atomic_load(&f->done) != 0)
        ;
    double t_cma = 0, t_shm = 0;
    int rc = 0;
    for (int round = 1; round <= iters && rc == 0; round++) {
        atomic_store(&f->go, round);
        while (atomic_load(&f->done) != round)
            ;
        double t0 = cma_now();
        if (round & 1) {
            rc = cma_read(pid, f->addr, dst, n, chunk);
            t_cma += cma_now() - t0;
        } else {
            memcpy(dst, shared, n);
            __asm__ volatile("" : : "r"(dst) : "memory");
            t_shm += cma_now() - t0;
        }
        if (rc == 0 && (unsigned char)dst[n / 2] != (unsigned char)(round & 0xff)) {
            fprintf(stderr, "cma-bw: round %d read stale data\n", round);
            rc = -1;
        }
    }
    atomic_store(&f->go, -1);
    waitpid(pid, NULL, 0);
    if (rc != 0)
        return 1;
    t_cma /= (iters + 1) / 2;
    t_shm /= iters / 2;
    printf("%zu bytes, chunk %zu, reader cpu %d, writer cpu %d: process_vm_readv %.1f us "
           "(%.2f GB/s), memcpy from shared memory %.1f us (%.2f GB/s)\n", n, chunk, rcpu, wcpu,
           t_cma * 1e6, (double)n / t_cma / 1e9, t_shm * 1e6, (double)n / t_shm / 1e9);
    return 0;
}
