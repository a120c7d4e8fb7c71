/* plaitrun internals: the job, its ranks and the pieces of the launcher.
 *
 * Threads: everything here belongs to the main thread, except the PMIx
 * server callbacks (plr_server.c) which run on the PMIx progress thread and
 * only ever hand heap-allocated plr_event_t records to the main thread
 * through a pipe. */
#ifndef PLR_H
#define PLR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "launcher/binding.h"

#define PLR_NAME "plaitrun"

/* Exit codes with a fixed meaning (documented in --help). */
enum {
    PLR_EXIT_USAGE   = 2,
    PLR_EXIT_TIMEOUT = 124,
    PLR_EXIT_NOEXEC  = 127,
};

typedef struct plr_opts {
    int    nranks;
    char **xvars;          /* -x arguments as given: "VAR" or "VAR=value" */
    int    nxvars;
    plr_bind_policy_t bind;
    bool   bind_given;     /* --bind-to was on the command line */
    bool   report_bindings;
    double timeout_s;      /* 0: none */
    bool   tag_output;
    char **argv;           /* program and its arguments (points into main's argv) */
} plr_opts_t;

/* One output stream of one rank, line-buffered so that lines of different
 * ranks never interleave on plaitrun's own stdout/stderr. */
typedef struct plr_stream {
    int    fd;             /* read end of the rank's pipe; -1 once closed */
    int    out_fd;         /* 1 or 2 */
    int    rank;
    char  *buf;
    size_t len, cap;
} plr_stream_t;

typedef enum { PLR_RANK_NEW, PLR_RANK_RUNNING, PLR_RANK_DONE } plr_rank_state_t;

typedef struct plr_rank {
    int              rank;
    pid_t            pid;          /* also its process group id */
    plr_rank_state_t state;
    int              wstatus;      /* from waitpid, valid when DONE */
    bool             connected;    /* called PMIx_Init */
    bool             finalized;    /* called PMIx_Finalize */
    bool             judged;       /* its exit was looked at */
    plr_stream_t     out, err;
    plr_cpuset_t     cpus;         /* binding, empty when not bound */
} plr_rank_t;

/* stdin of plaitrun forwarded to rank 0 through a pipe. */
typedef struct plr_stdin {
    int    in_fd;          /* plaitrun's stdin; -1 after EOF/error */
    int    pipe_fd;        /* write end to rank 0; -1 when closed */
    char   buf[65536];
    size_t len, off;
} plr_stdin_t;

typedef struct plr_job {
    plr_opts_t  opts;
    char        nspace[256];       /* PMIX_MAX_NSLEN + 1, as pmix_nspace_t */
    char        hostname[256];
    char        tmpdir[4096];
    char       *exe;               /* resolved program path */
    plr_rank_t *ranks;
    int         nlive;             /* ranks started and not reaped */
    bool        ending;            /* a failure/signal ended the job */
    int         exit_code;
    double      t_start, kill_at;  /* monotonic seconds; kill_at 0: no SIGKILL pending */
    bool        killed;            /* SIGKILL already sent */
    int         ev_rd;             /* read end of the PMIx event pipe */
    plr_stdin_t in;
} plr_job_t;

/* ---- events handed from the PMIx thread to the main loop (plr_server.c) */
typedef enum { PLR_EV_CONNECTED, PLR_EV_FINALIZED, PLR_EV_ABORT } plr_event_type_t;
typedef struct plr_event {
    plr_event_type_t type;
    int  rank;
    int  code;
    char msg[];                    /* abort message, NUL-terminated */
} plr_event_t;

int  plr_server_init(plr_job_t *job);
int  plr_server_register_job(plr_job_t *job);
int  plr_server_setup_rank(plr_job_t *job, int rank, char ***env);
void plr_server_fini(plr_job_t *job);

/* ---- I/O forwarding (plr_io.c) */
void plr_stream_init(plr_stream_t *s, int fd, int out_fd, int rank);
/* Reads what is available; returns false once the stream reached EOF. */
bool plr_stream_read(plr_stream_t *s, bool tag);
void plr_stream_drain(plr_stream_t *s, bool tag);   /* read until EAGAIN/EOF, flush, close */
void plr_stream_free(plr_stream_t *s);
void plr_write_all(int fd, const char *p, size_t n);
void plr_stdin_init(plr_stdin_t *in, int pipe_fd);
void plr_stdin_on_input(plr_stdin_t *in);
void plr_stdin_on_writable(plr_stdin_t *in);
void plr_stdin_close(plr_stdin_t *in);

/* ---- processes (plr_proc.c) */
int  plr_signals_init(void);       /* returns the read end of the signal self-pipe */
void plr_signals_block(bool block);
int  plr_proc_spawn(plr_job_t *job, int rank);
void plr_proc_reap(plr_job_t *job);
void plr_proc_signal_all(plr_job_t *job, int sig);
void plr_proc_on_signal(plr_job_t *job, int sig);
void plr_job_fail(plr_job_t *job, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
double plr_now(void);

/* ---- cleanup (plr_cleanup.c) */
int  plr_tmpdir_create(char *path, size_t size);
void plr_tmpdir_remove(const char *path);
void plr_shm_remove(const char *nspace);

/* ---- main loop (plr_loop.c) */
int  plr_loop_run(plr_job_t *job, int sig_rd);
void plr_loop_events(plr_job_t *job);      /* handle every event already posted */

#endif /* PLR_H */
