/* plaitrun: starts N local ranks of a program and serves them PMIx.
 *
 *   plaitrun [options] program [args...]
 *
 * This file: command line, job setup and teardown.  The PMIx server is in
 * plr_server.c, process handling in plr_proc.c, the event loop in
 * plr_loop.c, I/O forwarding in plr_io.c, binding in binding.c. */
#include "config.h"

#include "launcher/plr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PLR_MAX_RANKS 4096

static void plr_usage(FILE *f)
{
    fprintf(f,
        "Usage: " PLR_NAME " [options] program [args...]\n"
        "Starts N ranks of program on this host and serves them PMIx (plait_init finds them).\n"
        "\n"
        "Options:\n"
        "  -n, -np N              number of ranks (default 1)\n"
        "  -x VAR[=value]         set VAR in the ranks (VAR alone: pass plaitrun's value;\n"
        "                         the ranks inherit plaitrun's environment anyway); repeatable\n"
        "  --bind-to core|numa|none\n"
        "                         bind each rank to a core (a host's rank r: core r; hosts\n"
        "                         sharing one machine take consecutive blocks), or spread the\n"
        "                         ranks in blocks over the NUMA nodes, or not at all;\n"
        "                         default: core when N <= cores, else none (cores: those\n"
        "                         of the CPU mask plaitrun was started with)\n"
        "  --report-bindings      print each rank's binding to stderr\n"
        "  --timeout SEC          end the whole job after SEC seconds (exit 124)\n"
        "  --tag-output           prefix every output line with \"[rank] \"\n"
        "\n"
        "Several hosts (plaitrun starts a daemon on each; ranks on one host use shared\n"
        "memory, ranks on different hosts plait's multipath UDP transport; PLAIT_TRANSPORT\n"
        "forces one):\n"
        "  --host H1:N1,H2:N2,... hosts and their slots (no :N: 1 slot)\n"
        "  --hostfile FILE        one 'host [slots=N]' per line; '#' starts a comment\n"
        "                         (-n defaults to the number of slots)\n"
        "  --map-by slot|node     fill each host in turn (default), or one rank per host\n"
        "                         round-robin\n"
        "  --launch-agent CMD     how to run a command on a host: CMD's words, {host}\n"
        "                         replaced by the host name (appended when absent), then\n"
        "                         the daemon's command line; default\n"
        "                         'ssh -x -o BatchMode=yes {host}' (a host named localhost\n"
        "                         is started directly); e.g. 'ip netns exec {host}'\n"
        "  --head-address ADDR    the IPv4 address daemons connect to (default: the local\n"
        "                         address that routes to the hosts, or the only\n"
        "                         non-loopback one when host names do not resolve)\n"
        "  --fanout K             daemons form a tree of fan-out K (default 32)\n"
        "  The job secret reaches the daemons on their stdin; the ranks' stdin is\n"
        "  /dev/null.  PLAIT_LAUNCH_TIMEOUT (default 60 s) bounds a daemon's start.\n"
        "  -h, --help             this text\n"
        "  -V, --version          print the version\n"
        "\n"
        "stdin goes to rank 0 (on this host only: with --host every rank reads /dev/null);\n"
        "the other ranks read /dev/null.\n"
        "Exit status: 0 when every rank exited 0 (after plait_finalize if it called\n"
        "plait_init); else the first failing rank's status (128+N for signal N), the\n"
        "plait_abort code (1 if 0), 124 timeout, 127 program cannot be executed,\n"
        "130/143 plaitrun interrupted, 2 bad command line.\n");
}

static int plr_usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, PLR_NAME ": ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry '" PLR_NAME " --help' for more information.\n");
    return PLR_EXIT_USAGE;
}

static bool plr_parse_int(const char *s, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < 1 || v > PLR_MAX_RANKS)
        return false;
    *out = (int)v;
    return true;
}

static bool plr_valid_var(const char *x)
{
    const char *eq = strchr(x, '=');
    size_t n = eq ? (size_t)(eq - x) : strlen(x);
    if (n == 0 || n > 200 || (x[0] >= '0' && x[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = x[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_'))
            return false;
    }
    return true;
}

/* An option's value: "--opt=value" or the next argument. */
static const char *plr_optval(int argc, char **argv, int *i, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) == 0 && argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (*i + 1 >= argc)
        return NULL;
    return argv[++*i];
}

static bool plr_is(const char *arg, const char *name)
{
    size_t n = strlen(name);
    return strncmp(arg, name, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

/* Returns -1 to go on, or an exit status (0 after --help/--version). */
static int plr_parse_one(plr_opts_t *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *v;
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
        plr_usage(stdout);
        return 0;
    }
    if (!strcmp(a, "-V") || !strcmp(a, "--version")) {
        printf(PLR_NAME " (plait) %s\n", PACKAGE_VERSION);
        return 0;
    }
    if (plr_is(a, "-n") || plr_is(a, "-np") || plr_is(a, "--np") || plr_is(a, "--n")) {
        const char *name = a[1] == '-' ? (a[3] == 'p' ? "--np" : "--n") : (a[2] == 'p' ? "-np" : "-n");
        if ((v = plr_optval(argc, argv, i, name)) == NULL)
            return plr_usage_error("option '%s' needs a number of ranks", a);
        if (!plr_parse_int(v, &o->nranks))
            return plr_usage_error("invalid number of ranks '%s' (1..4096)", v);
        o->nranks_given = true;
    } else if (!strcmp(a, "-x")) {
        if (*i + 1 >= argc)
            return plr_usage_error("option '%s' needs VAR or VAR=value", a);
        v = argv[++*i];
        if (!plr_valid_var(v))
            return plr_usage_error("invalid -x argument '%s' (expected VAR or VAR=value)", v);
        o->xvars[o->nxvars++] = (char *)v;
    } else if (plr_is(a, "--bind-to")) {
        if ((v = plr_optval(argc, argv, i, "--bind-to")) == NULL)
            return plr_usage_error("option '%s' needs core, numa or none", a);
        if (plr_bind_parse(v, &o->bind) != 0)
            return plr_usage_error("invalid --bind-to value '%s' (core, numa or none)", v);
        o->bind_given = true;
    } else if (!strcmp(a, "--report-bindings")) {
        o->report_bindings = true;
    } else if (plr_is(a, "--timeout")) {
        char *end;
        if ((v = plr_optval(argc, argv, i, "--timeout")) == NULL)
            return plr_usage_error("option '%s' needs a number of seconds", a);
        o->timeout_s = strtod(v, &end);
        if (end == v || *end || !(o->timeout_s > 0) || o->timeout_s > 1e9)
            return plr_usage_error("invalid --timeout value '%s' (seconds > 0)", v);
    } else if (!strcmp(a, "--tag-output")) {
        o->tag_output = true;
    } else if (plr_is(a, "--host") || plr_is(a, "--hostfile")) {
        bool file = plr_is(a, "--hostfile");
        if ((v = plr_optval(argc, argv, i, file ? "--hostfile" : "--host")) == NULL)
            return plr_usage_error("option '%s' needs a value", a);
        if (o->hosts)
            return plr_usage_error("%s", "give --host or --hostfile once");
        int rc = file ? plr_hosts_parse_file(v, &o->hosts, &o->nhosts)
                      : plr_hosts_parse_list(v, &o->hosts, &o->nhosts);
        if (rc != 0)
            return PLR_EXIT_USAGE;
    } else if (plr_is(a, "--map-by")) {
        if ((v = plr_optval(argc, argv, i, "--map-by")) == NULL)
            return plr_usage_error("option '%s' needs slot or node", a);
        if (strcmp(v, "slot") && strcmp(v, "node"))
            return plr_usage_error("invalid --map-by value '%s' (slot or node)", v);
        o->map = strcmp(v, "node") ? PLR_MAP_SLOT : PLR_MAP_NODE;
    } else if (plr_is(a, "--launch-agent")) {
        if ((v = plr_optval(argc, argv, i, "--launch-agent")) == NULL || !v[strspn(v, " \t")])
            return plr_usage_error("option '%s' needs a command", a);
        o->agent = v;
    } else if (plr_is(a, "--head-address")) {
        struct in_addr ip;
        if ((v = plr_optval(argc, argv, i, "--head-address")) == NULL)
            return plr_usage_error("option '%s' needs an IPv4 address", a);
        if (inet_pton(AF_INET, v, &ip) != 1)
            return plr_usage_error("invalid --head-address '%s' (an IPv4 address, e.g. 10.0.0.1)", v);
        o->head_addr = v;
    } else if (plr_is(a, "--fanout")) {
        if ((v = plr_optval(argc, argv, i, "--fanout")) == NULL || !plr_parse_int(v, &o->fanout))
            return plr_usage_error("invalid --fanout value '%s' (1..4096)", v ? v : "");
    } else {
        return plr_usage_error("unknown option '%s'", a);
    }
    return -1;
}

static int plr_parse(plr_opts_t *o, int argc, char **argv)
{
    o->nranks = 1;
    o->xvars = calloc((size_t)argc, sizeof(char *));
    int i;
    for (i = 1; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--")) {
            i++;
            break;
        }
        int rc = plr_parse_one(o, argc, argv, &i);
        if (rc >= 0)
            return rc;
    }
    if (i >= argc)
        return plr_usage_error("%s", "no program given");
    o->argv = argv + i;
    if (o->hosts == NULL && (o->agent || o->head_addr))
        return plr_usage_error("%s", "--launch-agent and --head-address need --host or --hostfile");
    for (int k = 0; k < o->nxvars; k++)
        if (!strchr(o->xvars[k], '=') && getenv(o->xvars[k]) == NULL)
            fprintf(stderr, PLR_NAME ": warning: -x %s: not set in plaitrun's environment\n",
                    o->xvars[k]);
    return -1;
}

/* ------------------------------------------------------------ program lookup */

/* Resolved in the parent (the child may only call execve).  Like execvp:
 * a name with '/' is used as is, else the first executable match in PATH. */
char *plr_find_program(const char *name, int *err)
{
    *err = ENOENT;
    if (name[0] == '\0')
        return NULL;
    if (strchr(name, '/')) {
        *err = access(name, X_OK) == 0 ? 0 : errno;
        return *err ? NULL : strdup(name);
    }
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path;; p = strchr(p, ':') + 1) {
        size_t n = strcspn(p, ":");
        char cand[PATH_MAX];
        struct stat st;
        if (snprintf(cand, sizeof(cand), "%.*s/%s", (int)n, n ? p : ".", name) < (int)sizeof(cand) &&
            stat(cand, &st) == 0 && S_ISREG(st.st_mode)) {
            if (access(cand, X_OK) == 0) {
                *err = 0;
                return strdup(cand);
            }
            *err = EACCES;
        }
        if (p[n] == '\0')
            break;
    }
    return NULL;
}

/* ------------------------------------------------------------ setup */

/* Children get 0-2 as their stdio; make sure ours are open so a pipe never
 * lands on them. */
static void plr_stdio_sanitize(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0)
            open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
}

/* A host that claimed a block records its ranks' CPUs for the other hosts
 * sharing this machine (binding.h): their library threads keep off them. */
static void plr_job_bind_record(plr_job_t *job, int first)
{
    char cpus[PLR_BIND_LINE_MAX] = "";
    size_t at = 0;
    if (!job->bind_claimed)
        return;
    for (int r = 0; r < job->opts.nranks; r++) {
        const plr_cpuset_t *c = &job->ranks[r].cpus;
        int n;
        if (!c->bound || !c->cpus[0])
            continue;
        n = snprintf(cpus + at, sizeof(cpus) - at, "%s%s", at ? "," : "", c->cpus);
        if (n < 0 || (size_t)n >= sizeof(cpus) - at)
            return;   /* too long to record: the hosts' threads may meet, as before */
        at += (size_t)n;
    }
    job->bind_recorded = at > 0 && plr_bind_record(PLR_BIND_DIR, job->nspace, first, cpus) == 0;
}

int plr_job_bindings(plr_job_t *job)
{
    plr_opts_t *o = &job->opts;
    int ncores = plr_bind_ncores(), first = 0;
    /* a host of a multi-host job may share this machine with others */
    if (job->mode == PLR_MODE_DAEMON && (!o->bind_given || o->bind == PLR_BIND_CORE))
        first = plr_bind_claim(PLR_BIND_DIR, job->nspace, o->nranks, &job->bind_claimed);
    if (!o->bind_given)
        o->bind = first + o->nranks <= ncores ? PLR_BIND_CORE : PLR_BIND_NONE;
    else if (o->bind == PLR_BIND_CORE && first + o->nranks > ncores)
        fprintf(stderr, PLR_NAME ": warning: %d ranks on %d cores%s: ranks share cores\n",
                first + o->nranks, ncores, first ? " (with hosts of this job on the same machine)" : "");
    char err[256];
    plr_cpuset_t *sets = calloc((size_t)o->nranks, sizeof(*sets));
    if (sets && plr_bind_compute(o->bind, o->nranks, first, sets, err, sizeof(err)) == 0) {
        for (int r = 0; r < o->nranks; r++)
            job->ranks[r].cpus = sets[r];
        free(sets);
        plr_job_bind_record(job, first);
        return 0;
    }
    if (sets == NULL)
        snprintf(err, sizeof(err), "out of memory");
    free(sets);
    if (!o->bind_given) {                  /* default policy: unbound is fine */
        o->bind = PLR_BIND_NONE;
        return 0;
    }
    fprintf(stderr, PLR_NAME ": %s\n", err);
    return -1;
}

static int plr_job_setup(plr_job_t *job)
{
    snprintf(job->nspace, sizeof(job->nspace), "plait.%d", (int)getpid());
    if (gethostname(job->hostname, sizeof(job->hostname) - 1) != 0)
        strcpy(job->hostname, "localhost");
    job->in.in_fd = job->in.pipe_fd = -1;
    job->ranks = calloc((size_t)job->opts.nranks, sizeof(plr_rank_t));
    if (job->ranks == NULL)
        return -1;
    for (int r = 0; r < job->opts.nranks; r++) {
        job->ranks[r].rank = r;
        plr_stream_init(&job->ranks[r].out, -1, 1, r);
        plr_stream_init(&job->ranks[r].err, -1, 2, r);
    }
    if (plr_job_bindings(job) != 0)
        return -1;
    if (plr_tmpdir_create(job->tmpdir, sizeof(job->tmpdir)) != 0) {
        job->tmpdir[0] = '\0';
        perror(PLR_NAME ": cannot create a temporary directory");
        return -1;
    }
    return 0;
}

/* false when PMIx did not let go (plr_server_fini): leave with _exit then. */
static bool plr_job_teardown(plr_job_t *job, bool server_up)
{
    bool clean = !server_up || plr_server_fini(job);
    plr_tmpdir_remove(job->tmpdir);
    plr_shm_remove(job->nspace);
    if (job->ranks)
        for (int r = 0; r < job->opts.nranks; r++) {
            plr_stream_free(&job->ranks[r].out);
            plr_stream_free(&job->ranks[r].err);
        }
    free(job->ranks);
    free(job->exe);
    free(job->opts.xvars);
    return clean;
}

static int plr_job_launch(plr_job_t *job, int sig_rd)
{
    job->t_start = plr_now();
    for (int r = 0; r < job->opts.nranks && !job->ending; r++)
        plr_proc_spawn(job, r);
    return plr_loop_run(job, sig_rd);
}

/* Several hosts: map the ranks, then the head does the rest (plr_head.c). */
static int plr_hosts_job(plr_job_t *job)
{
    plr_opts_t *o = &job->opts;
    if (!o->nranks_given) {
        o->nranks = 0;
        for (int h = 0; h < o->nhosts; h++)
            o->nranks += o->hosts[h].slots;
    }
    if (o->fanout == 0)
        o->fanout = 32;
    job->rank_node = calloc((size_t)o->nranks, sizeof(int));
    if (job->rank_node == NULL || plr_hosts_map(o, o->nranks, job->rank_node) != 0)
        return PLR_EXIT_USAGE;
    snprintf(job->nspace, sizeof(job->nspace), "plait.%d", (int)getpid());
    if (gethostname(job->hostname, sizeof(job->hostname) - 1) != 0)
        strcpy(job->hostname, "localhost");
    plr_stdio_sanitize();
    int sig_rd = plr_signals_init();
    if (sig_rd < 0)
        return 1;
    return plr_head_main(job, sig_rd);
}

int main(int argc, char **argv)
{
    plr_job_t job;
    memset(&job, 0, sizeof(job));
    if (argc > 1 && !strcmp(argv[1], "--daemon"))
        return plr_daemon_main(argc, argv);
    int rc = plr_parse(&job.opts, argc, argv);
    if (rc >= 0) {
        free(job.opts.xvars);
        free(job.opts.hosts);
        return rc;
    }
    if (job.opts.hosts) {
        rc = plr_hosts_job(&job);
        free(job.rank_node);
        free(job.opts.hosts);
        free(job.opts.xvars);
        return rc;
    }
    int err;
    job.exe = plr_find_program(job.opts.argv[0], &err);
    if (job.exe == NULL) {
        fprintf(stderr, PLR_NAME ": cannot execute '%s': %s\n", job.opts.argv[0], strerror(err));
        free(job.opts.xvars);
        return PLR_EXIT_NOEXEC;
    }
    plr_stdio_sanitize();
    int sig_rd = plr_signals_init();
    if (sig_rd < 0 || plr_job_setup(&job) != 0) {
        plr_job_teardown(&job, false);
        return 1;
    }
    plr_signals_block(true);
    rc = plr_server_init(&job);
    plr_signals_block(false);
    if (rc != 0) {
        plr_job_teardown(&job, false);
        return 1;
    }
    if (plr_server_register_job(&job) == 0)
        rc = plr_job_launch(&job, sig_rd);
    else
        rc = 1;
    if (!plr_job_teardown(&job, true)) {
        fflush(NULL);
        _exit(rc);   /* (exit handlers could wait on the PMIx threads left running) */
    }
    return rc;
}
