/* Hosts of a multi-host job: --host and --hostfile parsing, mapping ranks
 * to hosts, and the shape of the daemon tree.
 *
 * The daemons form a tree rooted at plaitrun (the head): with fan-out K the
 * head has daemons 0..K-1 as children and daemon d has (d+1)K .. (d+1)K+K-1.
 * Messages are routed along it, and the modex allgather is a gather up the
 * tree and a broadcast down, so no process talks to more than K+1 others. */
#include "config.h"

#include "launcher/plr.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PLR_MAX_HOSTS 4096
#define PLR_MAX_SLOTS 4096

/* Host names end up in command templates and PMIx node maps. */
static bool plr_host_name_ok(const char *s, size_t n)
{
    if (n == 0 || n >= sizeof(((plr_host_t *)0)->name))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '.' && s[i] != '-' && s[i] != '_')
            return false;
    return true;
}

static bool plr_slots_parse(const char *s, size_t n, int *out)
{
    char buf[16], *end;
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, s, n);
    buf[n] = '\0';
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (errno || *end || v < 1 || v > PLR_MAX_SLOTS)
        return false;
    *out = (int)v;
    return true;
}

/* Adds slots to a host, merging repeated names (a host listed twice has the
 * sum of its slots, as in mpirun hostfiles). */
static int plr_host_add(plr_host_t **hosts, int *nhosts, const char *name, size_t n, int slots)
{
    for (int i = 0; i < *nhosts; i++)
        if (strlen((*hosts)[i].name) == n && strncmp((*hosts)[i].name, name, n) == 0) {
            (*hosts)[i].slots += slots;
            return 0;
        }
    if (*nhosts >= PLR_MAX_HOSTS)
        return -1;
    plr_host_t *h = realloc(*hosts, (size_t)(*nhosts + 1) * sizeof(*h));
    if (h == NULL)
        return -1;
    memset(&h[*nhosts], 0, sizeof(h[0]));
    memcpy(h[*nhosts].name, name, n);
    h[*nhosts].slots = slots;
    *hosts = h;
    (*nhosts)++;
    return 0;
}

/* "h1:4,h2:4,h3" (no count: 1 slot). */
int plr_hosts_parse_list(const char *spec, plr_host_t **hosts, int *nhosts)
{
    const char *p = spec;
    for (;;) {
        size_t len = strcspn(p, ","), nlen = strcspn(p, ":,");
        int slots = 1;
        if (!plr_host_name_ok(p, nlen)) {
            fprintf(stderr, PLR_NAME ": --host: invalid host name '%.*s' in '%s'\n", (int)nlen, p,
                    spec);
            return -1;
        }
        if (nlen < len && !plr_slots_parse(p + nlen + 1, len - nlen - 1, &slots)) {
            fprintf(stderr, PLR_NAME ": --host: invalid slot count in '%.*s' (1..%d)\n", (int)len,
                    p, PLR_MAX_SLOTS);
            return -1;
        }
        if (plr_host_add(hosts, nhosts, p, nlen, slots) != 0) {
            fprintf(stderr, PLR_NAME ": --host: too many hosts\n");
            return -1;
        }
        if (p[len] == '\0')
            return 0;
        p += len + 1;
    }
}

/* One hostfile line without its comment: "" or "name [slots=N]".
 * Returns NULL, or what is wrong with it. */
static const char *plr_hostfile_line(char *line, plr_host_t **hosts, int *nhosts)
{
    char *words[3];
    int nw = 0;
    for (char *w = strtok(line, " \t\r\n"); w; w = strtok(NULL, " \t\r\n")) {
        if (nw == 2)
            return "expected 'host [slots=N]'";
        words[nw++] = w;
    }
    if (nw == 0)
        return NULL;
    int slots = 1;
    if (!plr_host_name_ok(words[0], strlen(words[0])))
        return "invalid host name (letters, digits, '.', '-', '_')";
    if (nw == 2) {
        if (strncmp(words[1], "slots=", 6) != 0)
            return "expected 'slots=N' after the host name";
        if (!plr_slots_parse(words[1] + 6, strlen(words[1] + 6), &slots))
            return "invalid slot count (1..4096)";
    }
    if (plr_host_add(hosts, nhosts, words[0], strlen(words[0]), slots) != 0)
        return "too many hosts";
    return NULL;
}

int plr_hosts_parse_file(const char *path, plr_host_t **hosts, int *nhosts)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, PLR_NAME ": cannot read hostfile '%s': %s\n", path, strerror(errno));
        return -1;
    }
    char line[1024];
    int lineno = 0, rc = 0;
    while (rc == 0 && fgets(line, sizeof(line), f)) {
        lineno++;
        size_t n = strlen(line);
        if (n == sizeof(line) - 1 && line[n - 1] != '\n') {
            fprintf(stderr, PLR_NAME ": %s:%d: line too long\n", path, lineno);
            rc = -1;
            break;
        }
        char copy[1024];
        line[strcspn(line, "\r\n")] = '\0';
        snprintf(copy, sizeof(copy), "%s", line);
        line[strcspn(line, "#")] = '\0';
        const char *why = plr_hostfile_line(line, hosts, nhosts);
        if (why) {
            fprintf(stderr, PLR_NAME ": %s:%d: %s: '%s'\n", path, lineno, why, copy);
            rc = -1;
        }
    }
    fclose(f);
    if (rc == 0 && *nhosts == 0) {
        fprintf(stderr, PLR_NAME ": %s: no hosts in the hostfile\n", path);
        rc = -1;
    }
    return rc;
}

/* slot: fill each host to its slots in order; node: one rank per host in
 * turn, skipping full hosts.  Then hosts without ranks are dropped, the
 * rest keep their order (node ids follow it). */
int plr_hosts_map(plr_opts_t *o, int size, int *rank_node)
{
    int total = 0;
    for (int h = 0; h < o->nhosts; h++)
        total += o->hosts[h].slots;
    if (size > total) {
        fprintf(stderr, PLR_NAME ": %d ranks asked for but the hosts have %d slots\n", size, total);
        return -1;
    }
    int h = 0;
    for (int r = 0; r < size; r++) {
        if (o->map == PLR_MAP_SLOT) {
            while (o->hosts[h].nranks == o->hosts[h].slots)
                h++;
        } else {
            while (o->hosts[h].nranks == o->hosts[h].slots)
                h = (h + 1) % o->nhosts;
        }
        rank_node[r] = h;
        o->hosts[h].nranks++;
        if (o->map == PLR_MAP_NODE)
            h = (h + 1) % o->nhosts;
    }
    int *renum = calloc(o->nhosts > 0 ? (size_t)o->nhosts : 1, sizeof(int)), n = 0;
    if (renum == NULL)
        return -1;
    for (int i = 0; i < o->nhosts; i++) {
        renum[i] = n;
        if (o->hosts[i].nranks > 0)
            o->hosts[n++] = o->hosts[i];
    }
    for (int r = 0; r < size; r++)
        rank_node[r] = renum[rank_node[r]];
    o->nhosts = n;
    free(renum);
    return 0;
}

int plr_tree_parent(int node, int fanout)
{
    return node / fanout - 1;
}

/* The next hop from me (-1: the head) toward dest: a child of me whose
 * subtree holds dest, or -2 for "up to my parent". */
int plr_tree_next_hop(int me, int dest, int fanout)
{
    for (int a = dest; a >= 0; a = plr_tree_parent(a, fanout))
        if (plr_tree_parent(a, fanout) == me)
            return a;
    return -2;
}
