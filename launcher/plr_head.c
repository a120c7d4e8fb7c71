/* plaitrun as the head of a job on several hosts.
 *
 * The head runs no rank itself.  It starts one daemon per host through the
 * launch agent (ssh, or a --launch-agent template such as
 * "ip netns exec {host}"), hands each the job secret on its stdin (never on
 * a command line, where ps would show it), accepts only connections that
 * prove the secret, and then runs the same main loop as on one host: the
 * ranks' output arrives as IO messages, their exits as EXIT messages and
 * failures as FAIL messages; the head decides the job's fate and tells the
 * daemons (KILL, END).
 *
 * The head's address (where daemons connect), in this order:
 *   1. --head-address ADDR;
 *   2. when every host name resolves: for each host the local address the
 *      kernel routes to it from (loopback for local hosts), one listening
 *      socket per distinct address;
 *   3. else the head's service address (plr_default_address), or its first
 *      up non-loopback IPv4 address (loopback when it has none); a daemon
 *      that cannot reach it names --head-address.  Namespace hosts, whose
 *      names do not resolve, use this rule. */
#include "config.h"

#include "launcher/plr_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define PLR_MAX_LISTEN  8
#define PLR_MAX_PENDING 16
#define PLR_HEAD_GIVEUP_S 5.0   /* after the SIGKILL, the longest the head waits for exits */
#define PLR_DEFAULT_AGENT "ssh -x -o BatchMode=yes {host}"

typedef struct plr_hfence {
    uint32_t   seq;
    int        got;
    plr_pack_t blobs;             /* children's blobs, concatenated in arrival order */
    struct plr_hfence *next;
} plr_hfence_t;

typedef struct plr_head {
    char        secret[PLR_SECRET_LEN + 1];
    int         nlisten;
    int         lfd[PLR_MAX_LISTEN], lport[PLR_MAX_LISTEN];
    char        laddr[PLR_MAX_LISTEN][INET_ADDRSTRLEN];
    int        *node_listen;      /* [nnodes]: the listening socket that node uses */
    plr_conn_t *pending[PLR_MAX_PENDING];
    plr_conn_t **child;           /* [nnodes]: connections of the head's own children */
    int         nchildren;
    pid_t      *agent;            /* [nnodes] */
    bool       *ready, *lost, *launched;
    double      launch_timeout;
    plr_pack_t  jobmsg;
    plr_hfence_t *fences;
    /* per node, as its daemon last said (PLR_MSG_JOINSTATE): a rank that
     * exited without joining (rank + 1, 0: none) and its pid; whether
     * joined ranks wait there */
    uint32_t   *join_who, *join_pid;
    bool       *join_waiting;
    char        exe[PATH_MAX];
    /* what each poll slot is: 0 listen, 1 pending, 2 child; index */
    int         slot_kind[PLR_MAX_LISTEN + PLR_MAX_PENDING + 4096];
    int         slot_idx[PLR_MAX_LISTEN + PLR_MAX_PENDING + 4096];
} plr_head_t;

static plr_head_t *plr_head_of(plr_job_t *job)
{
    return job->net;
}

/* ------------------------------------------------------------ addresses */

/* The local address the kernel would use to reach addr (no packet is sent). */
static int plr_route_source(const struct in_addr *to, char *out)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(9), .sin_addr = *to };
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? plr_tcp_local_addr(fd, out, INET_ADDRSTRLEN) : -1;
    close(fd);
    return rc;
}

/*
 * The head's address when host names do not resolve: the host's service
 * address if it has one (an IPv4 address outside 127/8 on the loopback
 * device: fabrics that route to the host reach it over every link), else
 * the first address of the first up interface. A daemon that cannot reach
 * it says so and names --head-address.
 */
static int plr_default_address(char *out)
{
    struct ifaddrs *ifa, *i;
    int found = 0;
    if (getifaddrs(&ifa) != 0)
        return -1;
    strcpy(out, "127.0.0.1");
    for (int pass = 0; pass < 2 && !found; pass++) {
        for (i = ifa; i && !found; i = i->ifa_next) {
            struct in_addr a;
            int lo = (i->ifa_flags & IFF_LOOPBACK) != 0;
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP))
                continue;
            a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
            if (pass == 0 ? !lo || (ntohl(a.s_addr) >> 24) == 127 : lo)
                continue;
            inet_ntop(AF_INET, &a, out, INET_ADDRSTRLEN);
            found = 1;
        }
    }
    freeifaddrs(ifa);
    return 0;
}

/* Fills addr[node] (INET_ADDRSTRLEN each) following the rules above. */
static int plr_head_choose(plr_job_t *job, char (*addr)[INET_ADDRSTRLEN])
{
    if (job->opts.head_addr) {
        struct in_addr a;
        if (inet_pton(AF_INET, job->opts.head_addr, &a) != 1) {
            fprintf(stderr, PLR_NAME ": --head-address '%s' is not an IPv4 address\n",
                    job->opts.head_addr);
            return -1;
        }
        for (int n = 0; n < job->nnodes; n++)
            snprintf(addr[n], INET_ADDRSTRLEN, "%s", job->opts.head_addr);
        return 0;
    }
    for (int n = 0; n < job->nnodes; n++) {
        struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM }, *res;
        if (strcmp(job->node_names[n], "localhost") == 0) {
            strcpy(addr[n], "127.0.0.1");
            continue;
        }
        if (getaddrinfo(job->node_names[n], NULL, &hints, &res) != 0) {
            char only[INET_ADDRSTRLEN];         /* rule 3 for every host */
            if (plr_default_address(only) != 0)
                return -1;
            for (int k = 0; k < job->nnodes; k++)
                strcpy(addr[k], only);
            return 0;
        }
        struct in_addr to = ((struct sockaddr_in *)res->ai_addr)->sin_addr;
        freeaddrinfo(res);
        if (plr_route_source(&to, addr[n]) != 0) {
            fprintf(stderr, PLR_NAME ": no route to host %s\n", job->node_names[n]);
            return -1;
        }
    }
    return 0;
}

static int plr_head_listen(plr_job_t *job, plr_head_t *hd)
{
    char (*addr)[INET_ADDRSTRLEN] = calloc((size_t)job->nnodes, INET_ADDRSTRLEN);
    int rc = addr ? plr_head_choose(job, addr) : -1;
    for (int n = 0; rc == 0 && n < job->nnodes; n++) {
        int l;
        for (l = 0; l < hd->nlisten && strcmp(hd->laddr[l], addr[n]) != 0; l++)
            ;
        if (l == hd->nlisten) {
            if (l == PLR_MAX_LISTEN || (hd->lfd[l] = plr_tcp_listen(addr[n], &hd->lport[l])) < 0) {
                fprintf(stderr, PLR_NAME ": cannot listen on %s: %s\n", addr[n], strerror(errno));
                rc = -1;
                break;
            }
            strcpy(hd->laddr[l], addr[n]);
            hd->nlisten++;
        }
        hd->node_listen[n] = l;
    }
    free(addr);
    return rc;
}

/* ------------------------------------------------------------ launching */

/* The agent template split at blanks, {host} replaced, then the daemon's
 * command line.  A template without {host} gets the host name appended
 * (like "ssh"). */
static char **plr_agent_argv(plr_job_t *job, plr_head_t *hd, int node, const char *parent)
{
    const char *host = job->node_names[node];
    const char *tmpl = job->opts.agent;
    if (tmpl == NULL)
        tmpl = strcmp(host, "localhost") == 0 ? "" : PLR_DEFAULT_AGENT;
    char *t = strdup(tmpl);
    char **argv = calloc(strlen(tmpl) / 2 + 12, sizeof(char *));
    if (t == NULL || argv == NULL) {
        free(t);
        free(argv);
        return NULL;
    }
    int n = 0;
    bool used = false;
    for (char *w = strtok(t, " \t"); w; w = strtok(NULL, " \t")) {
        char buf[1024], *at;
        size_t len = 0;
        while ((at = strstr(w, "{host}")) != NULL && len < sizeof(buf) - 200) {
            len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%.*s%s", (int)(at - w), w, host);
            w = at + 6;
            used = true;
        }
        snprintf(buf + len, sizeof(buf) - len, "%s", w);
        argv[n++] = strdup(buf);
    }
    if (n > 0 && !used)
        argv[n++] = strdup(host);
    char nodestr[16];
    snprintf(nodestr, sizeof(nodestr), "%d", node);
    argv[n++] = strdup(hd->exe);
    argv[n++] = strdup("--daemon");
    argv[n++] = strdup("--parent");
    argv[n++] = strdup(parent);
    argv[n++] = strdup("--node");
    argv[n++] = strdup(nodestr);
    free(t);
    return argv;
}

static void plr_argv_free(char **argv)
{
    for (int i = 0; argv && argv[i]; i++)
        free(argv[i]);
    free(argv);
}

static void plr_agent_child(char **argv, int in_fd)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < NSIG; s++)
        sigaction(s, &sa, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    setpgid(0, 0);                         /* Ctrl-C reaches the head only */
    if (dup2(in_fd, 0) < 0 || dup2(2, 1) < 0)
        _exit(PLR_EXIT_NOEXEC);
    close_range(3, ~0U, 0);
    execvp(argv[0], argv);
    static const char msg[] = PLR_NAME ": cannot execute the launch agent\n";
    if (write(2, msg, sizeof(msg) - 1) < 0) {
        /* nothing to do */
    }
    _exit(PLR_EXIT_NOEXEC);
}

static int plr_head_launch(plr_job_t *job, int node, const char *parent)
{
    plr_head_t *hd = plr_head_of(job);
    char **argv = plr_agent_argv(job, hd, node, parent);
    int p[2];
    if (argv == NULL || pipe2(p, O_CLOEXEC) != 0) {
        plr_argv_free(argv);
        plr_job_fail(job, 1, PLR_NAME ": cannot start the daemon on host %s: out of resources",
                     job->node_names[node]);
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0)
        plr_agent_child(argv, p[0]);
    plr_argv_free(argv);
    close(p[0]);
    if (pid < 0) {
        close(p[1]);
        plr_job_fail(job, 1, PLR_NAME ": cannot start the daemon on host %s: %s",
                     job->node_names[node], strerror(errno));
        return -1;
    }
    setpgid(pid, pid);
    hd->agent[node] = pid;
    hd->launched[node] = true;
    /* 65 bytes fit in any pipe: this write does not block. */
    char line[PLR_SECRET_LEN + 2];
    snprintf(line, sizeof(line), "%s\n", hd->secret);
    plr_write_all(p[1], line, strlen(line));
    close(p[1]);
    return 0;
}

/* ------------------------------------------------------------ ranks and nodes */

static void plr_head_rank_done(plr_job_t *job, int r)
{
    plr_rank_t *rk = &job->ranks[r];
    if (rk->state != PLR_RANK_RUNNING)
        return;
    rk->state = PLR_RANK_DONE;
    job->nlive--;
    plr_stream_flush_tail(&rk->out, job->opts.tag_output);
    plr_stream_flush_tail(&rk->err, job->opts.tag_output);
}

static bool plr_in_subtree(int node, int top, int fanout)
{
    for (int a = node; a >= 0; a = plr_tree_parent(a, fanout))
        if (a == top)
            return true;
    return false;
}

static bool plr_head_rank_on(const plr_job_t *job, int r, const void *node)
{
    return job->rank_node[r] == *(const int *)node;
}

/* node's daemon and every one below it are gone or will never start: their
 * ranks are done. Quietly: plr_head_node_lost says why where it is a
 * failure; where the job was ending before they started (plr_head_ready) it
 * is none (a black-box test: the head waited for them for ever once an
 * earlier daemon had failed). */
static void plr_head_forget(plr_job_t *job, int node)
{
    plr_head_t *hd = plr_head_of(job);
    for (int n = 0; n < job->nnodes; n++) {
        if (!plr_in_subtree(n, node, job->opts.fanout) || hd->lost[n])
            continue;
        hd->lost[n] = true;
        for (int r = 0; r < job->size; r++)
            if (job->rank_node[r] == n)
                plr_head_rank_done(job, r);
    }
}

/* A daemon is gone: so are its ranks and those of every daemon below it. */
static void plr_head_node_lost(plr_job_t *job, int node, const char *why)
{
    plr_head_t *hd = plr_head_of(job);
    if (hd->lost[node])
        return;
    char ranks[256];
    plr_ranks_format(job, ranks, sizeof ranks, plr_head_rank_on, &node);
    plr_job_fail(job, 1, PLR_NAME ": lost the daemon on host %s (ranks %s): %s",
                 job->node_names[node], ranks, why);
    plr_head_forget(job, node);
}

static bool plr_head_rank_running(const plr_job_t *job, int r, const void *unused)
{
    (void)unused;
    return job->ranks[r].state == PLR_RANK_RUNNING;
}

/* Stops waiting for ranks no daemon reports any more (asked twice to end,
 * or PLR_HEAD_GIVEUP_S after the SIGKILL): the shutdown that follows kills
 * the launch agents left. */
void plr_head_give_up(plr_job_t *job)
{
    char ranks[256];
    if (job->nlive <= 0)
        return;
    plr_ranks_format(job, ranks, sizeof ranks, plr_head_rank_running, NULL);
    fprintf(stderr, PLR_NAME ": gave up waiting for ranks %s: their daemons did not report "
            "them ending\n", ranks);
    fflush(stderr);
    for (int r = 0; r < job->size; r++)
        plr_head_rank_done(job, r);
}

void plr_head_signal(plr_job_t *job, int sig)
{
    plr_head_t *hd = plr_head_of(job);
    uint32_t be = htonl((uint32_t)sig);
    for (int n = 0; n < job->nnodes; n++)
        if (hd->child[n])
            plr_conn_send(hd->child[n], PLR_MSG_KILL, PLR_NODE_HEAD, PLR_NODE_ALL, &be, 4);
}

void plr_head_reap(plr_job_t *job)
{
    plr_head_t *hd = plr_head_of(job);
    for (int n = 0; n < job->nnodes; n++) {
        int st;
        if (hd->agent[n] <= 0 || waitpid(hd->agent[n], &st, WNOHANG) != hd->agent[n])
            continue;
        hd->agent[n] = -1;
        char why[128];
        if (WIFSIGNALED(st))
            snprintf(why, sizeof(why), "its launch agent was killed by signal %d", WTERMSIG(st));
        else
            snprintf(why, sizeof(why), "its launch agent exited with status %d", WEXITSTATUS(st));
        if (!hd->ready[n])
            snprintf(why + strlen(why), sizeof(why) - strlen(why), " before the daemon started");
        if (job->nlive > 0)
            plr_head_node_lost(job, n, why);
    }
}

/* ------------------------------------------------------------ fences */

static void plr_head_fence_up(plr_job_t *job, uint32_t seq, const char *blob, size_t n)
{
    plr_head_t *hd = plr_head_of(job);
    plr_hfence_t **pp = &hd->fences, *f;
    while (*pp && (*pp)->seq != seq)
        pp = &(*pp)->next;
    if ((f = *pp) == NULL && (f = *pp = calloc(1, sizeof(*f))) == NULL) {
        plr_job_fail(job, 1, PLR_NAME ": out of memory in a fence");
        return;
    }
    f->seq = seq;
    f->got++;
    if (n > 0) {
        plr_pack_t *b = &f->blobs;
        if (b->cap - b->len < n) {
            char *p = realloc(b->p, b->len + n);
            if (p == NULL) {
                plr_job_fail(job, 1, PLR_NAME ": out of memory in a fence");
                return;
            }
            b->p = p;
            b->cap = b->len + n;
        }
        memcpy(b->p + b->len, blob, n);
        b->len += n;
    }
    if (f->got < hd->nchildren)
        return;
    plr_pack_t m = { 0 };
    plr_put_u32(&m, seq);
    plr_put_bytes(&m, f->blobs.p, f->blobs.len);
    for (int c = 0; c < job->nnodes && !m.bad; c++)
        if (hd->child[c])
            plr_conn_send(hd->child[c], PLR_MSG_FENCE_DOWN, PLR_NODE_HEAD, PLR_NODE_ALL, m.p, m.len);
    free(m.p);
    *pp = f->next;
    free(f->blobs.p);
    free(f);
}

/* ------------------------------------------------------------ messages */

/* A rank that exited without joining on one host while joined ranks wait
 * on another: the job can never get past plait_init (each daemon catches
 * the case among its own ranks, plr_proc_check_unjoined). */
static void plr_head_join_state(plr_job_t *job, int node, plr_unpack_t *u)
{
    plr_head_t *hd = plr_head_of(job);
    uint32_t who = plr_get_u32(u), pid = plr_get_u32(u), waiting = plr_get_u32(u);
    int gone = -1, wait = 0;
    if (u->bad || !hd->join_who || who > (uint32_t)job->size)
        return;
    hd->join_who[node] = who;
    hd->join_pid[node] = pid;
    hd->join_waiting[node] = waiting != 0;
    for (int n = 0; n < job->nnodes; n++) {
        if (hd->join_who[n] && gone < 0)
            gone = n;
        wait |= hd->join_waiting[n];
    }
    if (gone >= 0 && wait && !job->ending)
        plr_job_fail(job, 1, PLR_NAME ": host %s: rank %u (pid %u) " PLR_UNJOINED_TEXT,
                     job->node_names[gone], hd->join_who[gone] - 1, hd->join_pid[gone]);
}

/* "plaitrun: text" from a daemon becomes "plaitrun: host H: text". */
static void plr_head_daemon_fail(plr_job_t *job, int node, int code, const char *text)
{
    const char *p = strncmp(text, PLR_NAME ": ", strlen(PLR_NAME) + 2) == 0
                    ? text + strlen(PLR_NAME) + 2 : text;
    plr_job_fail(job, code ? code : 1, PLR_NAME ": host %s: %s", job->node_names[node], p);
}

static void plr_head_ready(plr_job_t *job, int node, plr_unpack_t *u)
{
    plr_head_t *hd = plr_head_of(job);
    const char *addr = plr_get_str(u);
    uint32_t port = plr_get_u32(u);
    if (u->bad || node < 0 || node >= job->nnodes)
        return;
    hd->ready[node] = true;
    char parent[INET_ADDRSTRLEN + 8];
    snprintf(parent, sizeof(parent), "%s:%u", addr, port);
    int k = job->opts.fanout;
    for (int c = (node + 1) * k; c < (node + 1) * k + k && c < job->nnodes; c++) {
        if (!job->ending)
            plr_head_launch(job, c, parent);
        else   /* never started now: nothing will report those ranks */
            plr_head_forget(job, c);
    }
}

static void plr_head_route(plr_job_t *job, const plr_msg_hdr_t *h, const char *p)
{
    plr_head_t *hd = plr_head_of(job);
    int hop = h->dest >= 0 && h->dest < job->nnodes ? plr_tree_next_hop(-1, h->dest, job->opts.fanout) : -2;
    if (hop >= 0 && hd->child[hop])
        plr_conn_send(hd->child[hop], (int)h->type, h->src, h->dest, p, h->len);
}

static void plr_head_message(plr_job_t *job, int from, const plr_msg_hdr_t *h, const char *p)
{
    plr_unpack_t u = { p, h->len, 0, false };
    int src = h->src;
    if (h->dest != PLR_NODE_HEAD) {
        plr_head_route(job, h, p);         /* daemon to daemon (direct modex) */
        return;
    }
    if (src < 0 || src >= job->nnodes)
        return;
    switch (h->type) {
    case PLR_MSG_READY:
        plr_head_ready(job, src, &u);
        break;
    case PLR_MSG_IO: {
        uint32_t rank = plr_get_u32(&u), fd = plr_get_u32(&u);
        size_t n;
        const char *b = plr_get_bytes(&u, &n);
        if (!u.bad && rank < (uint32_t)job->size && job->ranks[rank].state == PLR_RANK_RUNNING)
            plr_stream_feed(fd == 2 ? &job->ranks[rank].err : &job->ranks[rank].out, b, n,
                            job->opts.tag_output);
        break;
    }
    case PLR_MSG_JOINSTATE:
        plr_head_join_state(job, src, &u);
        break;
    case PLR_MSG_JOINED: {
        uint32_t rank = plr_get_u32(&u);
        if (!u.bad && rank < (uint32_t)job->size && job->rank_node[rank] == src)
            job->ranks[rank].connected = true;
        break;
    }
    case PLR_MSG_EXIT: {
        uint32_t rank = plr_get_u32(&u);
        if (!u.bad && rank < (uint32_t)job->size)
            plr_head_rank_done(job, (int)rank);
        break;
    }
    case PLR_MSG_FAIL: {
        uint32_t code = plr_get_u32(&u);
        const char *text = plr_get_str(&u);
        if (!u.bad)
            plr_head_daemon_fail(job, src, (int)code, text);
        break;
    }
    case PLR_MSG_LOST: {
        uint32_t node = plr_get_u32(&u);
        if (!u.bad && node < (uint32_t)job->nnodes)
            plr_head_node_lost(job, (int)node, "the connection to its parent daemon broke");
        break;
    }
    case PLR_MSG_FENCE_UP: {
        uint32_t seq = plr_get_u32(&u);
        size_t n;
        const char *b = plr_get_bytes(&u, &n);
        if (!u.bad && src == from)
            plr_head_fence_up(job, seq, b, n);
        break;
    }
    default:
        break;
    }
}

/* Said once per connection that leaves without proving the secret. */
static void plr_head_refuse(plr_head_t *hd, int slot)
{
    fprintf(stderr, PLR_NAME ": refused a connection that did not prove the job secret\n");
    plr_conn_free(hd->pending[slot]);
    hd->pending[slot] = NULL;
}

/* A new connection's first message must be HELLO with the job secret from
 * one of the head's own children that is not connected yet. */
static void plr_head_hello(plr_job_t *job, int slot)
{
    plr_head_t *hd = plr_head_of(job);
    plr_conn_t *c = hd->pending[slot];
    uint32_t node = 0;
    int rc = plr_hello_take(c, hd->secret, &node);
    if (rc == 0)
        return;
    if (rc < 0 || node >= (uint32_t)job->nnodes ||
        plr_tree_parent((int)node, job->opts.fanout) != -1 || hd->child[node] || hd->lost[node]) {
        plr_head_refuse(hd, slot);
        return;
    }
    hd->pending[slot] = NULL;
    c->node = (int)node;
    c->authed = true;
    hd->child[node] = c;
    if (plr_conn_send(c, PLR_MSG_JOB, PLR_NODE_HEAD, (int)node, hd->jobmsg.p, hd->jobmsg.len) != 0)
        plr_head_node_lost(job, (int)node, "cannot send it the job");
}

static void plr_head_accept(plr_head_t *hd, int lfd)
{
    plr_accept_pending(lfd, hd->pending, PLR_MAX_PENDING);
}

static void plr_head_child_io(plr_job_t *job, int node, short revents)
{
    plr_head_t *hd = plr_head_of(job);
    plr_conn_t *c = hd->child[node];
    bool broken = false;
    if (revents & POLLOUT)
        broken = plr_conn_flush(c) != 0;
    if (revents & (POLLIN | POLLHUP | POLLERR))
        broken = plr_conn_read(c) != 0 || broken;
    plr_msg_hdr_t h;
    const char *p;
    while (hd->child[node] && plr_conn_next(c, &h, &p)) {
        if (h.type == 0) {
            broken = true;
            break;
        }
        plr_head_message(job, node, &h, p);
    }
    if (broken) {
        plr_conn_free(c);
        hd->child[node] = NULL;
        if (job->nlive > 0)
            plr_head_node_lost(job, node, "its connection to plaitrun broke");
    }
}

/* ------------------------------------------------------------ loop hooks */

int plr_head_maxfds(plr_job_t *job)
{
    return PLR_MAX_LISTEN + PLR_MAX_PENDING + job->nnodes;
}

int plr_head_fill(plr_job_t *job, struct pollfd *fds, int max)
{
    plr_head_t *hd = plr_head_of(job);
    int n = 0;
    for (int l = 0; l < hd->nlisten && n < max; l++, n++) {
        fds[n] = (struct pollfd){ .fd = hd->lfd[l],   /* (a full pending table: backlog) */
                                  .events = plr_pending_room(hd->pending, PLR_MAX_PENDING) >= 0
                                                ? POLLIN : 0 };
        hd->slot_kind[n] = 0;
        hd->slot_idx[n] = l;
    }
    for (int s = 0; s < PLR_MAX_PENDING && n < max; s++) {
        if (!hd->pending[s])
            continue;
        fds[n] = (struct pollfd){ .fd = hd->pending[s]->fd, .events = POLLIN };
        hd->slot_kind[n] = 1;
        hd->slot_idx[n++] = s;
    }
    for (int c = 0; c < job->nnodes && n < max; c++) {
        if (!hd->child[c])
            continue;
        fds[n] = (struct pollfd){ .fd = hd->child[c]->fd,
                                  .events = POLLIN | (plr_conn_pending(hd->child[c]) ? POLLOUT : 0) };
        hd->slot_kind[n] = 2;
        hd->slot_idx[n++] = c;
    }
    return n;
}

void plr_head_handle(plr_job_t *job, struct pollfd *fds, int n)
{
    plr_head_t *hd = plr_head_of(job);
    for (int i = 0; i < n; i++) {
        if (!fds[i].revents)
            continue;
        int idx = hd->slot_idx[i];
        if (hd->slot_kind[i] == 0)
            plr_head_accept(hd, hd->lfd[idx]);
        else if (hd->slot_kind[i] == 1 && hd->pending[idx])
            plr_head_hello(job, idx);
        else if (hd->slot_kind[i] == 2 && hd->child[idx])
            plr_head_child_io(job, idx, fds[i].revents);
    }
}

void plr_head_tick(plr_job_t *job)
{
    plr_head_t *hd = plr_head_of(job);
    double now = plr_now();
    for (int s = 0; s < PLR_MAX_PENDING; s++)
        if (hd->pending[s] && now > hd->pending[s]->deadline)
            plr_head_refuse(hd, s);
    if (job->ending && job->killed && job->kill_at > 0 && now > job->kill_at + PLR_HEAD_GIVEUP_S)
        plr_head_give_up(job);
    for (int n = 0; n < job->nnodes && !job->ending; n++)
        if (!hd->ready[n] && !hd->lost[n] && now > job->t_start + hd->launch_timeout) {
            char why[96];
            snprintf(why, sizeof(why), "the daemon did not start within %g s "
                     "(PLAIT_LAUNCH_TIMEOUT)", hd->launch_timeout);
            plr_head_node_lost(job, n, why);
        }
}

/* ------------------------------------------------------------ setup */

/* The job as every daemon gets it (see plr_daemon.c for the reading side). */
static int plr_head_jobmsg(plr_job_t *job, plr_head_t *hd)
{
    plr_pack_t *b = &hd->jobmsg;
    plr_opts_t *o = &job->opts;
    char cwd[PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) == NULL)
        strcpy(cwd, "/");
    plr_put_u32(b, (uint32_t)job->size);
    plr_put_u32(b, (uint32_t)job->nnodes);
    plr_put_u32(b, (uint32_t)o->fanout);
    for (int n = 0; n < job->nnodes; n++)
        plr_put_str(b, job->node_names[n]);
    for (int r = 0; r < job->size; r++)
        plr_put_u32(b, (uint32_t)job->rank_node[r]);
    plr_put_u32(b, (o->report_bindings ? 1u : 0u) | (o->bind_given ? 2u : 0u));
    plr_put_u32(b, (uint32_t)o->bind);
    plr_put_str(b, job->nspace);
    plr_put_str(b, cwd);
    int argc = 0;
    while (o->argv[argc])
        argc++;
    plr_put_u32(b, (uint32_t)argc);
    for (int i = 0; i < argc; i++)
        plr_put_str(b, o->argv[i]);
    /* "-x VAR" means plaitrun's value: resolve it here, the daemons have
     * their own environments. */
    plr_put_u32(b, (uint32_t)o->nxvars);
    for (int i = 0; i < o->nxvars; i++) {
        const char *x = o->xvars[i], *v = getenv(x);
        char buf[8192];
        if (!strchr(x, '='))
            snprintf(buf, sizeof(buf), "%s=%s", x, v ? v : "");
        plr_put_str(b, strchr(x, '=') ? x : buf);
    }
    return b->bad ? -1 : 0;
}

static int plr_head_setup(plr_job_t *job, plr_head_t *hd)
{
    plr_opts_t *o = &job->opts;
    int nn = o->nhosts;
    job->mode = PLR_MODE_HEAD;
    job->mynode = -1;
    job->ev_rd = -1;
    job->in.in_fd = job->in.pipe_fd = -1;
    job->net = hd;
    job->size = o->nranks;
    job->nnodes = nn;
    job->node_names = calloc((size_t)nn, sizeof(*job->node_names));
    job->ranks = calloc((size_t)job->size, sizeof(plr_rank_t));
    hd->node_listen = calloc((size_t)nn, sizeof(int));
    hd->child = calloc((size_t)nn, sizeof(plr_conn_t *));
    hd->agent = calloc((size_t)nn, sizeof(pid_t));
    hd->ready = calloc((size_t)nn, sizeof(bool));
    hd->lost = calloc((size_t)nn, sizeof(bool));
    hd->launched = calloc((size_t)nn, sizeof(bool));
    hd->join_who = calloc((size_t)nn, sizeof(uint32_t));
    hd->join_pid = calloc((size_t)nn, sizeof(uint32_t));
    hd->join_waiting = calloc((size_t)nn, sizeof(bool));
    if (!job->node_names || !job->ranks || !hd->node_listen || !hd->child || !hd->agent ||
        !hd->ready || !hd->lost || !hd->launched || !hd->join_who || !hd->join_pid ||
        !hd->join_waiting)
        return -1;
    for (int n = 0; n < nn; n++)
        snprintf(job->node_names[n], sizeof(job->node_names[n]), "%s", o->hosts[n].name);
    for (int r = 0; r < job->size; r++) {
        job->ranks[r].rank = r;
        job->ranks[r].state = PLR_RANK_RUNNING;     /* until its daemon reports the exit */
        plr_stream_init(&job->ranks[r].out, -1, 1, r);
        plr_stream_init(&job->ranks[r].err, -1, 2, r);
    }
    job->nlive = job->size;
    hd->nchildren = nn < o->fanout ? nn : o->fanout;
    const char *t = getenv("PLAIT_LAUNCH_TIMEOUT");
    hd->launch_timeout = t && atof(t) > 0 ? atof(t) : 60.0;
    ssize_t len = readlink("/proc/self/exe", hd->exe, sizeof(hd->exe) - 1);
    if (len <= 0)
        return -1;
    hd->exe[len] = '\0';
    plr_secret_new(hd->secret);
    return plr_head_jobmsg(job, hd);
}

/* After the last rank: END to every daemon, then wait (bounded) for the
 * daemons to clean up and exit; a daemon that does not is killed (its
 * watchdog still cleans its host). */
static void plr_head_shutdown(plr_job_t *job, plr_head_t *hd)
{
    for (int c = 0; c < job->nnodes; c++)
        if (hd->child[c])
            plr_conn_send(hd->child[c], PLR_MSG_END, PLR_NODE_HEAD, PLR_NODE_ALL, NULL, 0);
    double until = plr_now() + 5.0;
    for (;;) {
        bool any = false;
        for (int n = 0; n < job->nnodes; n++) {
            if (hd->agent[n] <= 0)
                continue;
            if (waitpid(hd->agent[n], NULL, WNOHANG) == hd->agent[n])
                hd->agent[n] = -1;
            else
                any = true;
        }
        if (!any || plr_now() > until)
            break;
        for (int c = 0; c < job->nnodes; c++) {
            if (!hd->child[c])
                continue;
            plr_conn_flush(hd->child[c]);
            if (plr_conn_read(hd->child[c]) != 0) {   /* the daemon is done with us */
                plr_conn_free(hd->child[c]);
                hd->child[c] = NULL;
            }
        }
        usleep(20000);
    }
    for (int n = 0; n < job->nnodes; n++)
        if (hd->agent[n] > 0) {
            kill(-hd->agent[n], SIGKILL);
            waitpid(hd->agent[n], NULL, 0);
        }
}

static void plr_head_free(plr_job_t *job, plr_head_t *hd)
{
    for (int c = 0; c < job->nnodes && hd->child; c++)
        plr_conn_free(hd->child[c]);
    for (int s = 0; s < PLR_MAX_PENDING; s++)
        plr_conn_free(hd->pending[s]);
    for (int l = 0; l < hd->nlisten; l++)
        close(hd->lfd[l]);
    while (hd->fences) {
        plr_hfence_t *f = hd->fences;
        hd->fences = f->next;
        free(f->blobs.p);
        free(f);
    }
    for (int r = 0; job->ranks && r < job->size; r++) {
        plr_stream_free(&job->ranks[r].out);
        plr_stream_free(&job->ranks[r].err);
    }
    free(hd->jobmsg.p);
    free(hd->node_listen);
    free(hd->child);
    free(hd->agent);
    free(hd->ready);
    free(hd->lost);
    free(hd->launched);
    free(hd->join_who);
    free(hd->join_pid);
    free(hd->join_waiting);
    free(hd);
    free(job->node_names);
    free(job->ranks);
    job->ranks = NULL;
}

int plr_head_main(plr_job_t *job, int sig_rd)
{
    plr_head_t *hd = calloc(1, sizeof(*hd));
    if (hd == NULL || plr_head_setup(job, hd) != 0 || plr_head_listen(job, hd) != 0) {
        if (hd && hd->child == NULL)
            fprintf(stderr, PLR_NAME ": cannot set up the job\n");
        if (hd)
            plr_head_free(job, hd);
        return 1;
    }
    job->t_start = plr_now();
    for (int n = 0; n < hd->nchildren && !job->ending; n++) {
        char parent[INET_ADDRSTRLEN + 8];
        int l = hd->node_listen[n];
        snprintf(parent, sizeof(parent), "%s:%d", hd->laddr[l], hd->lport[l]);
        plr_head_launch(job, n, parent);
    }
    int rc = plr_loop_run(job, sig_rd);
    plr_head_shutdown(job, hd);
    plr_head_free(job, hd);
    return rc;
}
