/* Unit test of plaitrun's rank -> cpuset mapping (launcher/binding.c) on
 * synthetic hwloc topologies, so core and NUMA layouts this machine does not
 * have are covered.  Prints TAP-style "ok - ..." lines; exit 1 on a failure.
 *
 * binding.c is compiled into this program directly (it is not part of any
 * library): build with -I<top_srcdir> and hwloc. */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#ifndef PLAIT_HAVE_HWLOC
#define PLAIT_HAVE_HWLOC 1
#endif

#include "launcher/binding.c"

#include <stdlib.h>

static int failures;

static hwloc_topology_t load(const char *desc)
{
    hwloc_topology_t t;
    if (hwloc_topology_init(&t) != 0 || hwloc_topology_set_synthetic(t, desc) != 0 ||
        hwloc_topology_load(t) != 0) {
        printf("not ok - load synthetic topology '%s'\n", desc);
        exit(1);
    }
    return t;
}

/* Expect rank -> PUs [first, first+count) and object index idx. */
static bool expect(hwloc_topology_t t, plr_bind_policy_t pol, int n, int r, unsigned first,
                   unsigned count, int idx)
{
    hwloc_bitmap_t got = hwloc_bitmap_alloc(), want = hwloc_bitmap_alloc();
    hwloc_bitmap_set_range(want, first, first + count - 1);
    int index = -1, rc = plr_bind_map(t, pol, n, r, got, &index);
    bool ok = rc == 0 && hwloc_bitmap_isequal(got, want) && index == idx;
    if (!ok) {
        char g[128], w[128];
        hwloc_bitmap_list_snprintf(g, sizeof(g), got);
        hwloc_bitmap_list_snprintf(w, sizeof(w), want);
        printf("# %s, %d ranks, rank %d: rc %d, cpus %s index %d; expected cpus %s index %d\n",
               plr_bind_name(pol), n, r, rc, g, index, w, idx);
    }
    hwloc_bitmap_free(got);
    hwloc_bitmap_free(want);
    return ok;
}

static void report(bool ok, const char *name)
{
    printf("%s - %s\n", ok ? "ok" : "not ok", name);
    failures += !ok;
}

/* 2 packages x 2 NUMA x 4 cores x 1 PU: 16 cores, 4 NUMA nodes of 4 PUs. */
static void test_numa_machine(void)
{
    hwloc_topology_t t = load("package:2 numa:2 core:4 pu:1");
    bool ok = true;
    for (int r = 0; r < 8; r++)
        ok &= expect(t, PLR_BIND_CORE, 8, r, (unsigned)r, 1, r);
    report(ok, "core binding, 8 ranks on 16 cores: rank r on core r");
    ok = true;
    for (int r = 0; r < 16; r++)
        ok &= expect(t, PLR_BIND_CORE, 16, r, (unsigned)r, 1, r);
    report(ok, "core binding, 16 ranks on 16 cores: one rank per core");
    ok = expect(t, PLR_BIND_CORE, 20, 17, 1, 1, 1) && expect(t, PLR_BIND_CORE, 20, 16, 0, 1, 0);
    report(ok, "core binding, 20 ranks on 16 cores wraps around");
    ok = true;
    for (int r = 0; r < 8; r++)
        ok &= expect(t, PLR_BIND_NUMA, 8, r, 4u * (unsigned)(r / 2), 4, r / 2);
    report(ok, "numa binding, 8 ranks on 4 nodes: 2 consecutive ranks per node");
    ok = true;
    for (int r = 0; r < 16; r++)
        ok &= expect(t, PLR_BIND_NUMA, 16, r, 4u * (unsigned)(r / 4), 4, r / 4);
    report(ok, "numa binding, 16 ranks on 4 nodes: 4 consecutive ranks per node");
    ok = expect(t, PLR_BIND_NUMA, 2, 0, 0, 4, 0) && expect(t, PLR_BIND_NUMA, 2, 1, 8, 4, 2);
    report(ok, "numa binding, 2 ranks on 4 nodes: spread over the nodes");
    hwloc_bitmap_t s = hwloc_bitmap_alloc();
    int idx;
    ok = plr_bind_map(t, PLR_BIND_NONE, 4, 0, s, &idx) == 1 &&
         plr_bind_map(t, PLR_BIND_CORE, 4, 4, s, &idx) == -1 &&
         plr_bind_map(t, PLR_BIND_CORE, 4, -1, s, &idx) == -1;
    report(ok, "no binding for none; out-of-range ranks are errors");
    hwloc_bitmap_free(s);
    hwloc_topology_destroy(t);
}

/* Cores with 2 hardware threads and a single (implicit) NUMA node. */
static void test_smt_machine(void)
{
    hwloc_topology_t t = load("package:2 core:4 pu:2");
    bool ok = true;
    for (int r = 0; r < 8; r++)
        ok &= expect(t, PLR_BIND_CORE, 8, r, 2u * (unsigned)r, 2, r);
    report(ok, "core binding with 2 PUs per core: each rank gets both PUs of its core");
    ok = true;
    for (int r = 0; r < 16; r++)
        ok &= expect(t, PLR_BIND_NUMA, 16, r, 0, 16, 0);
    report(ok, "numa binding on a single node: every rank gets the whole machine");
    hwloc_topology_destroy(t);
}

/* Hosts of one job on one machine claim disjoint core blocks; the last
 * to release removes the claim file; a directory it cannot write to, or a
 * job name with a slash, claims nothing and starts at slot 0. */
static void test_colocated_claims(void)
{
    char dir[] = "/tmp/t-bindclaim.XXXXXX", path[PATH_MAX];
    bool c1 = false, c2 = false, c3 = true, c4 = true;
    if (!mkdtemp(dir)) {
        report(false, "co-located hosts: temporary directory");
        return;
    }
    snprintf(path, sizeof(path), "%s/plaitrun-bind.plait.77", dir);
    int a = plr_bind_claim(dir, "plait.77", 2, &c1);
    int b = plr_bind_claim(dir, "plait.77", 3, &c2);
    int other = plr_bind_claim(dir, "plait.78", 4, &c3);
    report(a == 0 && b == 2 && c1 && c2 && other == 0 && c3,
           "co-located hosts: first host slots 0-1, second 2-4, another job from 0");
    /* each host's bound CPUs, kept through later claims and releases */
    bool rec = plr_bind_record(dir, "plait.77", 0, "0-1") == 0 &&
               plr_bind_record(dir, "plait.77", 2, "2,3,4") == 0;
    bool c5;
    int third = plr_bind_claim(dir, "plait.77", 1, &c5);
    plr_bind_release(dir, "plait.77");
    char text[256] = "";
    FILE *f = fopen(path, "r");
    size_t got = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
    if (f)
        fclose(f);
    text[got] = '\0';
    bool lines = rec && third == 5 && c5 && strcmp(text, "6 2\n0 0-1\n2 2,3,4\n") == 0;
    if (!lines)
        printf("# claim file:\n%s", text);
    report(lines, "co-located hosts: the hosts' CPU lines survive a claim and a release");
    plr_bind_release(dir, "plait.77");
    bool kept = access(path, F_OK) == 0;
    plr_bind_release(dir, "plait.77");
    report(kept && access(path, F_OK) != 0, "co-located hosts: the last host removes the claim");
    plr_bind_release(dir, "plait.78");
    int none = plr_bind_claim("/nonexistent-dir", "plait.77", 2, &c4);
    int slash = plr_bind_claim(dir, "../x", 2, &c3);
    report(none == 0 && !c4 && slash == 0 && !c3,
           "co-located hosts: no claim where the file cannot be made (slot 0)");
    rmdir(dir);
}

int main(void)
{
    test_numa_machine();
    test_smt_machine();
    test_colocated_claims();
    return failures ? 1 : 0;
}
