/* Starting, signalling and reaping the ranks; ending the job.
 *
 * Every rank leads its own process group (setpgid in both parent and child,
 * so neither order races), which lets plaitrun end whatever a rank started
 * with one kill(-pgid). */
#include "config.h"

#include "launcher/plr.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int plr_sig_wr = -1;
static const int plr_sigs[] = { SIGCHLD, SIGINT, SIGTERM, SIGHUP };
#define PLR_NSIGS (sizeof(plr_sigs) / sizeof(plr_sigs[0]))

double plr_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------ signals */

static void plr_sig_handler(int sig)
{
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    if (write(plr_sig_wr, &b, 1) < 0) {
        /* pipe full: a wakeup is already pending, nothing is lost but a repeat */
    }
    errno = saved;
}

int plr_signals_init(void)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    plr_sig_wr = fds[1];
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = plr_sig_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    for (size_t i = 0; i < PLR_NSIGS; i++)
        sigaction(plr_sigs[i], &sa, NULL);
    /* A closed stdout or rank stdin must give EPIPE, not kill plaitrun. */
    signal(SIGPIPE, SIG_IGN);
    return fds[0];
}

/* Blocked while the PMIx progress thread is created, so that it inherits a
 * mask that steers our signals to the main thread (and wakes its poll). */
void plr_signals_block(bool block)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < PLR_NSIGS; i++)
        sigaddset(&set, plr_sigs[i]);
    pthread_sigmask(block ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

/* ------------------------------------------------------------ ending the job */

/* Entries of job->ranks: every rank of the job on the head, this host's on
 * a daemon (indexed locally there) or in a one-host job. */
static int plr_job_nranks(const plr_job_t *job)
{
    return job->mode == PLR_MODE_HEAD ? job->size : job->opts.nranks;
}

/* The ranks that want picks (ctx passed on), as "2,5,7": cut short with
 * ",..." past cap. */
void plr_ranks_format(const plr_job_t *job, char *buf, size_t cap,
                      bool (*want)(const plr_job_t *job, int r, const void *ctx), const void *ctx)
{
    int n = plr_job_nranks(job);
    size_t len = 0;
    buf[0] = '\0';
    for (int r = 0; r < n; r++) {
        if (!want(job, r, ctx))
            continue;
        if (len + 16 > cap) {
            snprintf(buf + len, cap - len, ",...");
            return;
        }
        len += (size_t)snprintf(buf + len, cap - len, len ? ",%d" : "%d", r);
    }
}

static bool plr_rank_unjoined_now(const plr_job_t *job, int r, const void *ctx)
{
    (void)ctx;
    return job->ranks[r].state == PLR_RANK_RUNNING && !job->ranks[r].connected;
}

/* When a job ends early while some ranks had called plait_init and others
 * still run without having called it, those others are named: the ranks
 * that joined can only say "a rank did not join" (PMIx's fence does not
 * tell whom it waited for), and a rank that is slow to start (or stuck
 * before plait_init) is the usual reason for an init timeout. */
static void plr_job_note_unjoined(const plr_job_t *job)
{
    int n = plr_job_nranks(job);
    bool joined = false;
    char list[256];
    if (job->mode == PLR_MODE_DAEMON)
        return;   /* (the head names them, across hosts: its table is by rank) */
    for (int r = 0; r < n; r++)
        joined |= job->ranks[r].connected;
    if (!joined)
        return;                            /* (plain programs: nobody joins) */
    plr_ranks_format(job, list, sizeof list, plr_rank_unjoined_now, NULL);
    if (!list[0])
        return;                            /* every running rank joined */
    fprintf(stderr, PLR_NAME ": when the job ended, %s %s had not called plait_init yet\n",
            strchr(list, ',') ? "ranks" : "rank", list);
    fflush(stderr);
}

static void plr_job_endv(plr_job_t *job, int code, int sig, const char *fmt, va_list ap)
{
    if (job->mode == PLR_MODE_DAEMON) {    /* the head decides the job's fate */
        char text[1024];
        vsnprintf(text, sizeof(text), fmt, ap);
        plr_daemon_fail(job, code, text);
        return;
    }
    if (job->ending)
        return;                            /* the first reason is the one reported */
    job->ending = true;
    job->exit_code = code;
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    fflush(stderr);
    plr_job_note_unjoined(job);
    plr_proc_signal_all(job, sig);
    job->kill_at = plr_now() + 1.0;
}

void plr_job_fail(plr_job_t *job, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    plr_job_endv(job, code, SIGTERM, fmt, ap);
    va_end(ap);
}

/* Reaped ranks are signalled too: their group may still hold processes
 * they started. */
void plr_proc_signal_all(plr_job_t *job, int sig)
{
    if (job->mode == PLR_MODE_HEAD) {      /* the ranks are the daemons' children */
        plr_head_signal(job, sig);
        return;
    }
    for (int r = 0; r < job->opts.nranks; r++) {
        plr_rank_t *rk = &job->ranks[r];
        if (rk->pid <= 0)
            continue;
        if (kill(-rk->pid, sig) != 0 && rk->state == PLR_RANK_RUNNING)
            kill(rk->pid, sig);            /* not yet its own group leader */
    }
}

/* plaitrun got SIGINT/SIGTERM/SIGHUP: pass it on, SIGKILL a second later. */
void plr_proc_on_signal(plr_job_t *job, int sig)
{
    if (job->ending) {
        if (sig == SIGINT || sig == SIGTERM) {   /* asked twice: stop waiting */
            plr_proc_signal_all(job, SIGKILL);
            job->killed = true;
            if (job->mode == PLR_MODE_HEAD)
                plr_head_give_up(job);
        }
        return;
    }
    job->ending = true;
    job->exit_code = 128 + sig;
    fprintf(stderr, PLR_NAME ": received signal %d (%s); ending the job\n", sig, strsignal(sig));
    fflush(stderr);
    plr_job_note_unjoined(job);
    plr_proc_signal_all(job, sig);
    job->kill_at = plr_now() + 1.0;
}

/* ------------------------------------------------------------ reaping */

static void plr_proc_judge(plr_job_t *job, plr_rank_t *rk)
{
    int st = rk->wstatus;
    if (WIFSIGNALED(st)) {
        int sig = WTERMSIG(st);
        plr_job_fail(job, 128 + sig, PLR_NAME ": rank %d (pid %d) was killed by signal %d (%s)",
                     rk->rank, (int)rk->pid, sig, strsignal(sig));
    } else if (WEXITSTATUS(st) != 0) {
        plr_job_fail(job, WEXITSTATUS(st), PLR_NAME ": rank %d (pid %d) exited with status %d",
                     rk->rank, (int)rk->pid, WEXITSTATUS(st));
    } else if (rk->connected && !rk->finalized) {
        plr_job_fail(job, 1, PLR_NAME ": rank %d (pid %d) exited without calling plait_finalize",
                     rk->rank, (int)rk->pid);
    } else if (!rk->connected) {
        rk->unjoined = true;
    }
}

/* A rank that exited with status 0 without joining the job (it never
 * called plait_init) while other ranks joined it: those wait for it in
 * plait_init's fence for ever (a job whose ranks never join, plain
 * programs, is fine). Checked when a rank exits and when one joins, over
 * this process's ranks; a daemon also reports both halves to the head,
 * which checks them across hosts (plr_head_join_state). */
void plr_proc_check_unjoined(plr_job_t *job)
{
    const plr_rank_t *gone = NULL;
    bool waiting = false;
    if (job->ending)
        return;
    for (int r = 0; r < job->opts.nranks; r++) {
        const plr_rank_t *rk = &job->ranks[r];
        if (rk->unjoined && !gone)
            gone = rk;
        else if (rk->state == PLR_RANK_RUNNING && rk->connected && !rk->finalized)
            waiting = true;
    }
    if (gone && waiting)
        plr_job_fail(job, 1, PLR_NAME ": rank %d (pid %d) " PLR_UNJOINED_TEXT, gone->rank,
                     (int)gone->pid);
    else if (job->mode == PLR_MODE_DAEMON)
        plr_daemon_report_join(job, gone, waiting);
}

void plr_proc_reap(plr_job_t *job)
{
    if (job->mode == PLR_MODE_HEAD) {
        plr_head_reap(job);
        return;
    }
    int nexited = 0;
    for (int r = 0; r < job->opts.nranks; r++) {
        plr_rank_t *rk = &job->ranks[r];
        if (rk->state != PLR_RANK_RUNNING)
            continue;
        pid_t p = waitpid(rk->pid, &rk->wstatus, WNOHANG);
        if (p == rk->pid || (p < 0 && errno == ECHILD)) {
            rk->state = PLR_RANK_DONE;
            job->nlive--;
            nexited++;
        }
    }
    if (nexited == 0)
        return;
    /* A rank's finalize/abort event was posted before it could exit, so it
     * is in the event pipe by now: take it before judging the exit. */
    plr_loop_events(job);
    for (int r = 0; r < job->opts.nranks; r++) {
        plr_rank_t *rk = &job->ranks[r];
        if (rk->state == PLR_RANK_DONE && rk->pid > 0 && !rk->judged) {
            rk->judged = true;
            if (job->mode == PLR_MODE_DAEMON) {
                /* its output first, so the head has it before the exit */
                plr_stream_drain(&rk->out, false);
                plr_stream_drain(&rk->err, false);
            }
            plr_proc_judge(job, rk);
            if (job->mode == PLR_MODE_DAEMON)
                plr_daemon_report_exit(job, rk);
        } else if (rk->state == PLR_RANK_DONE && rk->pid > 0 && job->mode == PLR_MODE_DAEMON &&
                   !rk->reported) {
            plr_daemon_report_exit(job, rk);   /* exec failure, judged at spawn */
        }
    }
    plr_proc_check_unjoined(job);
}

/* ------------------------------------------------------------ environment */

static int plr_env_set(char ***envp, const char *name, const char *value)
{
    char **env = *envp;
    size_t nl = strlen(name), n = 0;
    char *entry = malloc(nl + strlen(value) + 2);
    if (entry == NULL)
        return -1;
    sprintf(entry, "%s=%s", name, value);
    for (; env[n]; n++) {
        if (strncmp(env[n], name, nl) == 0 && env[n][nl] == '=') {
            free(env[n]);
            env[n] = entry;
            return 0;
        }
    }
    char **grown = realloc(env, (n + 2) * sizeof(*env));
    if (grown == NULL) {
        free(entry);
        return -1;
    }
    grown[n] = entry;
    grown[n + 1] = NULL;
    *envp = grown;
    return 0;
}

static void plr_env_free(char **env)
{
    if (env == NULL)
        return;
    for (size_t i = 0; env[i]; i++)
        free(env[i]);
    free(env);
}

/* plaitrun's environment, the -x settings, PLAIT_LAUNCHER, then what PMIx
 * needs (last, so PMIx's own variables win).  Heap strings in a heap array,
 * because PMIx_server_setup_fork frees and reallocates entries. */
static char **plr_env_build(plr_job_t *job, int idx)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 1, sizeof(*env));
    if (env == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        if ((env[i] = strdup(environ[i])) == NULL)
            goto fail;
    for (int i = 0; i < job->opts.nxvars; i++) {
        const char *x = job->opts.xvars[i], *eq = strchr(x, '=');
        if (eq == NULL)
            continue;                      /* "-x VAR": already inherited */
        char name[256];
        snprintf(name, sizeof(name), "%.*s", (int)(eq - x), x);
        if (plr_env_set(&env, name, eq + 1) != 0)
            goto fail;
    }
    if (plr_env_set(&env, "PLAIT_LAUNCHER", PLR_NAME) != 0)
        goto fail;
    if (job->bind_recorded) {   /* hosts sharing this machine: runtime/affinity.c */
        char path[PATH_MAX];
        if (plr_bind_path(PLR_BIND_DIR, job->nspace, path, sizeof(path)) != 0 ||
            plr_env_set(&env, "PLAIT_LAUNCH_CPUS_FILE", path) != 0)
            goto fail;
    }
    if (plr_server_setup_rank(job, idx, &env) != 0)
        goto fail;
    return env;
fail:
    plr_env_free(env);
    return NULL;
}

/* ------------------------------------------------------------ spawning */

/* Between fork and exec: only async-signal-safe calls. */
static void plr_child(plr_job_t *job, plr_rank_t *rk, int in_fd, int out_fd, int err_fd,
                      int exec_fd, char **env, pid_t parent)
{
    struct sigaction sa;
    /* A launcher killed outright (SIGKILL: no chance to end its ranks)
     * takes them along instead of leaving them running as orphans; the
     * check after covers a launcher that died before the request. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(PLR_EXIT_NOEXEC);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    for (size_t i = 0; i < PLR_NSIGS; i++)
        sigaction(plr_sigs[i], &sa, NULL);
    sigaction(SIGPIPE, &sa, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    setpgid(0, 0);
    if (dup2(in_fd, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0)
        goto fail;
    /* Keep only 0-2 and the exec-status pipe (CLOEXEC): no PMIx sockets, no
     * other ranks' pipes. */
    if (exec_fd > 3)
        close_range(3, (unsigned)exec_fd - 1, 0);
    close_range((unsigned)exec_fd + 1, ~0U, 0);
    if (plr_bind_apply(&rk->cpus) != 0) {
        static const char msg[] = PLR_NAME ": warning: could not bind a rank; it runs unbound\n";
        if (write(2, msg, sizeof(msg) - 1) < 0) {
            /* nothing to do */
        }
    }
    execve(job->exe, job->opts.argv, env);
fail:;
    int e = errno;
    if (write(exec_fd, &e, sizeof(e)) < 0) {
        /* the parent then sees EOF and reads the exit status instead */
    }
    _exit(PLR_EXIT_NOEXEC);
}

static int plr_pipe(int fds[2])
{
    return pipe2(fds, O_CLOEXEC);
}

/* Returns 0, or an errno value when the program could not be executed. */
static int plr_proc_start(plr_job_t *job, plr_rank_t *rk, char **env)
{
    int out[2], err[2], ex[2], in[2] = { -1, -1 };
    if (plr_pipe(out) || plr_pipe(err) || plr_pipe(ex))
        return errno;
    if (rk->rank == 0) {
        if (plr_pipe(in))
            return errno;
    } else if ((in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        return errno;
    }
    pid_t parent = getpid(), pid = fork();
    if (pid < 0)
        return errno;
    if (pid == 0)
        plr_child(job, rk, in[0], out[1], err[1], ex[1], env, parent);
    setpgid(pid, pid);
    rk->pid = pid;
    close(in[0]);
    close(out[1]);
    close(err[1]);
    close(ex[1]);
    int e = 0;
    ssize_t n;
    do {
        n = read(ex[0], &e, sizeof(e));  /* EOF: exec succeeded (CLOEXEC) */
    } while (n < 0 && errno == EINTR);
    close(ex[0]);
    plr_stream_init(&rk->out, out[0], 1, rk->rank);
    plr_stream_init(&rk->err, err[0], 2, rk->rank);
    rk->state = PLR_RANK_RUNNING;
    job->nlive++;
    if (rk->rank == 0)
        plr_stdin_init(&job->in, in[1]);
    return n == (ssize_t)sizeof(e) ? (e ? e : ENOEXEC) : 0;
}

/* idx: index in job->ranks (the rank itself on a one-host job). */
int plr_proc_spawn(plr_job_t *job, int idx)
{
    plr_rank_t *rk = &job->ranks[idx];
    int rank = rk->rank;
    char **env = plr_env_build(job, idx);
    if (env == NULL) {
        plr_job_fail(job, 1, PLR_NAME ": cannot prepare the environment of rank %d", rank);
        return -1;
    }
    int e = plr_proc_start(job, rk, env);
    plr_env_free(env);
    if (e != 0 && rk->pid <= 0) {
        plr_job_fail(job, 1, PLR_NAME ": cannot start rank %d: %s", rank, strerror(e));
        return -1;
    }
    if (e != 0) {
        rk->judged = true;                 /* exit 127 is explained here, not in reap */
        plr_job_fail(job, PLR_EXIT_NOEXEC, PLR_NAME ": cannot execute '%s': %s",
                     job->opts.argv[0], strerror(e));
        return -1;
    }
    if (job->opts.report_bindings && job->mode == PLR_MODE_DAEMON) {
        if (rk->cpus.bound)
            fprintf(stderr, PLR_NAME ": host %s: rank %d (pid %d) bound to %s (cpus %s)\n",
                    job->hostname, rank, (int)rk->pid, rk->cpus.where, rk->cpus.cpus);
        else
            fprintf(stderr, PLR_NAME ": host %s: rank %d (pid %d) not bound\n", job->hostname,
                    rank, (int)rk->pid);
    } else if (job->opts.report_bindings) {
        if (rk->cpus.bound)
            fprintf(stderr, PLR_NAME ": rank %d (pid %d) bound to %s (cpus %s)\n", rank,
                    (int)rk->pid, rk->cpus.where, rk->cpus.cpus);
        else
            fprintf(stderr, PLR_NAME ": rank %d (pid %d) not bound\n", rank, (int)rk->pid);
    }
    return 0;
}
