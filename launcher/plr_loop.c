/* The main loop: one poll() over the ranks' output pipes, the signal
 * self-pipe, the PMIx event pipe and stdin, woken at least every tick to
 * check the job timeout and the pending SIGKILL. */
#include "config.h"

#include "launcher/plr.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define PLR_TICK_MS 200

void plr_loop_events(plr_job_t *job)
{
    plr_event_t *ev;
    while (job->ev_rd >= 0 && read(job->ev_rd, &ev, sizeof(ev)) == (ssize_t)sizeof(ev)) {
        if (ev->type >= PLR_EV_FENCE) {    /* the daemon's network work */
            plr_daemon_event(job, ev);
            continue;
        }
        int idx = plr_rank_index(job, ev->rank);
        if (idx >= 0) {
            plr_rank_t *rk = &job->ranks[idx];
            if (ev->type == PLR_EV_CONNECTED) {
                rk->connected = true;
                if (job->mode == PLR_MODE_DAEMON)
                    plr_daemon_report_connected(job, rk);
                plr_proc_check_unjoined(job);
            } else if (ev->type == PLR_EV_FINALIZED) {
                rk->finalized = true;
                plr_proc_check_unjoined(job);   /* it no longer waits */
            } else {
                int code = ev->code & 0xff;
                plr_job_fail(job, code ? code : 1, PLR_NAME ": rank %d called plait_abort(%d): %s",
                             ev->rank, ev->code, ev->msg[0] ? ev->msg : "(no message)");
            }
        }
        plr_event_free(ev);
    }
}

static void plr_loop_signals(plr_job_t *job, int sig_rd)
{
    unsigned char sigs[64];
    ssize_t n;
    bool child = false;
    while ((n = read(sig_rd, sigs, sizeof(sigs))) > 0) {
        for (ssize_t i = 0; i < n; i++) {
            if (sigs[i] == SIGCHLD)
                child = true;
            else
                plr_proc_on_signal(job, sigs[i]);
        }
    }
    if (child)
        plr_proc_reap(job);
}

static int plr_loop_timeout_ms(plr_job_t *job, double now)
{
    double next = now + PLR_TICK_MS / 1000.0;
    if (!job->ending && job->opts.timeout_s > 0 && job->t_start + job->opts.timeout_s < next)
        next = job->t_start + job->opts.timeout_s;
    if (job->kill_at > 0 && !job->killed && job->kill_at < next)
        next = job->kill_at;
    int ms = (int)((next - now) * 1000.0 + 0.999);
    return ms < 0 ? 0 : ms;
}

static void plr_loop_deadlines(plr_job_t *job)
{
    double now = plr_now();
    if (!job->ending && job->opts.timeout_s > 0 && now >= job->t_start + job->opts.timeout_s)
        plr_job_fail(job, PLR_EXIT_TIMEOUT, PLR_NAME ": job timed out after %g s; ending it",
                     job->opts.timeout_s);
    if (job->kill_at > 0 && !job->killed && now >= job->kill_at) {
        plr_proc_signal_all(job, SIGKILL);
        job->killed = true;
    }
    plr_net_tick(job);
}

/* pollfd slots: 0 events, 1 signals, 2 stdin (read), 3 rank-0 stdin pipe
 * (write), then two per rank. */
typedef struct plr_pollset {
    struct pollfd *fds;
    plr_stream_t **streams;
    int            n;
} plr_pollset_t;

static void plr_pollset_fill(plr_job_t *job, plr_pollset_t *ps, int sig_rd)
{
    plr_stdin_t *in = &job->in;
    bool pending = in->off < in->len;
    ps->fds[0] = (struct pollfd){ .fd = job->ev_rd, .events = POLLIN };
    ps->fds[1] = (struct pollfd){ .fd = sig_rd, .events = POLLIN };
    ps->fds[2] = (struct pollfd){ .fd = pending || in->pipe_fd < 0 ? -1 : in->in_fd,
                                  .events = POLLIN };
    ps->fds[3] = (struct pollfd){ .fd = pending ? in->pipe_fd : -1, .events = POLLOUT };
    ps->n = 4;
    for (int r = 0; r < job->opts.nranks; r++) {
        plr_stream_t *s2[2] = { &job->ranks[r].out, &job->ranks[r].err };
        for (int k = 0; k < 2; k++) {
            ps->fds[ps->n] = (struct pollfd){ .fd = s2[k]->fd, .events = POLLIN };
            ps->streams[ps->n++] = s2[k];
        }
    }
}

static void plr_loop_io(plr_job_t *job, plr_pollset_t *ps, int nnet)
{
    plr_net_handle(job, ps->fds + ps->n, nnet);
    if (ps->fds[2].revents)
        plr_stdin_on_input(&job->in);
    if (ps->fds[3].revents)
        plr_stdin_on_writable(&job->in);
    for (int i = 4; i < ps->n; i++)
        if (ps->fds[i].revents && ps->streams[i]->fd >= 0)
            plr_stream_read(ps->streams[i], job->opts.tag_output);
}

int plr_loop_run(plr_job_t *job, int sig_rd)
{
    int nmax = plr_net_maxfds(job), nnet = 0;
    int max = 4 + 2 * job->opts.nranks + nmax;
    plr_pollset_t ps = { calloc((size_t)max, sizeof(struct pollfd)),
                         calloc((size_t)max, sizeof(plr_stream_t *)), 0 };
    int fl = fcntl(job->ev_rd, F_GETFL);
    fcntl(job->ev_rd, F_SETFL, fl | O_NONBLOCK);
    if (ps.fds == NULL || ps.streams == NULL) {
        plr_job_fail(job, 1, PLR_NAME ": out of memory");
        max = 0;
    }
    while (job->nlive > 0 || job->stay) {
        if (max > 0) {
            plr_pollset_fill(job, &ps, sig_rd);
            nnet = plr_net_fill(job, ps.fds + ps.n, nmax);
            int rc = poll(ps.fds, (nfds_t)(ps.n + nnet), plr_loop_timeout_ms(job, plr_now()));
            if (rc < 0 && errno != EINTR)
                break;
            if (rc > 0) {
                /* events before exits: a finalize must be seen before the exit it precedes */
                if (ps.fds[0].revents)
                    plr_loop_events(job);
                if (ps.fds[1].revents)
                    plr_loop_signals(job, sig_rd);
                plr_loop_io(job, &ps, nnet);
            }
        } else {
            usleep(PLR_TICK_MS * 1000);
        }
        plr_proc_reap(job);                /* also catches a coalesced or lost SIGCHLD */
        plr_loop_deadlines(job);
    }
    free(ps.fds);
    free(ps.streams);
    /* Whatever the ranks wrote before exiting is in the pipes now. */
    for (int r = 0; r < job->opts.nranks; r++) {
        plr_stream_drain(&job->ranks[r].out, job->opts.tag_output);
        plr_stream_drain(&job->ranks[r].err, job->opts.tag_output);
    }
    plr_stdin_close(&job->in);
    plr_proc_signal_all(job, SIGKILL);     /* anything the ranks left running */
    return job->exit_code;
}
