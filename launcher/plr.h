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

struct pollfd;

#include "launcher/binding.h"

#define PLR_NAME "plaitrun"
#define PLR_BIND_DIR "/dev/shm"   /* where co-located hosts claim core blocks (binding.h) */

/* Exit codes with a fixed meaning (documented in --help). */
enum {
    PLR_EXIT_USAGE   = 2,
    PLR_EXIT_TIMEOUT = 124,
    PLR_EXIT_NOEXEC  = 127,
};

/* Hosts of a multi-host job (plr_hosts.c). */
typedef struct plr_host {
    char name[64];
    int  slots;
    int  nranks;           /* ranks mapped to it */
} plr_host_t;

typedef enum { PLR_MAP_SLOT, PLR_MAP_NODE } plr_map_policy_t;
typedef enum { PLR_MODE_LOCAL, PLR_MODE_HEAD, PLR_MODE_DAEMON } plr_mode_t;

typedef struct plr_opts {
    int    nranks;
    bool   nranks_given;
    plr_host_t *hosts;     /* --host / --hostfile; NULL: one-host job */
    int    nhosts;
    plr_map_policy_t map;
    const char *agent;     /* --launch-agent template; NULL: ssh (or direct for localhost) */
    const char *head_addr; /* --head-address */
    int    fanout;         /* daemon tree fan-out */
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
    bool             unjoined;     /* exited with status 0 without calling PMIx_Init */
    bool             reported;     /* daemon: its exit was sent to the head */
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
    /* several hosts (plr_head.c, plr_daemon.c); all zero in a one-host job */
    plr_mode_t  mode;
    int         size;              /* ranks in the whole job (opts.nranks counts local ones) */
    int         nnodes, mynode;    /* mynode: -1 on the head */
    char      (*node_names)[64];
    int        *rank_node;         /* [size]: node of each rank */
    int        *rank_lrank;        /* [size]: local rank on its node */
    bool        stay;              /* keep the loop running with no live rank */
    bool        bind_claimed;      /* holds a block of core slots (plr_bind_claim) */
    bool        bind_recorded;     /* its ranks' CPUs are in the claim file (plr_bind_record) */
    void       *net;               /* connections: plr_head.c / plr_daemon.c state */
} plr_job_t;

/* ---- events handed from the PMIx thread to the main loop (plr_server.c) */
typedef enum {
    PLR_EV_CONNECTED, PLR_EV_FINALIZED, PLR_EV_ABORT,
    PLR_EV_FENCE,        /* fence_nb on a daemon: data/ndata, fn/cbdata to complete,
                          * code the caller's timeout in seconds (0: none) */
    PLR_EV_DMDX,         /* direct_modex for rank: fn/cbdata to complete */
    PLR_EV_DMDX_DATA,    /* local data for a remote request: code status, cbdata the request */
} plr_event_type_t;
typedef struct plr_event {
    plr_event_type_t type;
    int  rank;
    int  code;
    void  *fn, *cbdata;            /* PMIx callback to complete later */
    char  *data;                   /* heap copy */
    size_t ndata;
    char msg[];                    /* abort message, NUL-terminated */
} plr_event_t;

int  plr_server_init(plr_job_t *job);
int  plr_server_register_job(plr_job_t *job);
int  plr_server_setup_rank(plr_job_t *job, int rank, char ***env);
/* Releases the job and finalizes PMIx, each bounded in time; false when
 * PMIx did not let go (the process should then leave with _exit: the
 * library's threads may still run). */
bool plr_server_fini(plr_job_t *job);
/* Completes a fence/direct-modex callback saved in an event (data: heap, taken). */
void plr_server_complete(void *fn, void *cbdata, int status, char *data, size_t ndata);
void plr_server_timed_out(void *fn, void *cbdata);   /* the same, with PMIX_ERR_TIMEOUT */
/* Asks the local PMIx server for rank's data on behalf of a remote daemon;
 * the answer comes back as a PLR_EV_DMDX_DATA event carrying ctx. */
int  plr_server_dmodex_request(plr_job_t *job, int rank, void *ctx);
void plr_event_free(plr_event_t *ev);

/* ---- I/O forwarding (plr_io.c) */
void plr_stream_init(plr_stream_t *s, int fd, int out_fd, int rank);
/* Reads what is available; returns false once the stream reached EOF. */
bool plr_stream_read(plr_stream_t *s, bool tag);
void plr_stream_drain(plr_stream_t *s, bool tag);   /* read until EAGAIN/EOF, flush, close */
void plr_stream_free(plr_stream_t *s);
/* Head: bytes of a remote rank's stream; only whole lines leave. */
void plr_stream_feed(plr_stream_t *s, const char *p, size_t n, bool tag);
void plr_stream_flush_tail(plr_stream_t *s, bool tag);
/* Daemon: where complete lines go instead of a local fd. */
extern void (*plr_stream_sink)(plr_stream_t *s, const char *p, size_t n);
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
void plr_proc_check_unjoined(plr_job_t *job);
#define PLR_UNJOINED_TEXT "exited without joining the job (it never called plait_init), " \
                          "so the ranks that did would wait for it for ever"
void plr_proc_signal_all(plr_job_t *job, int sig);
void plr_ranks_format(const plr_job_t *job, char *buf, size_t cap,
                      bool (*want)(const plr_job_t *job, int r, const void *ctx), const void *ctx);
void plr_proc_on_signal(plr_job_t *job, int sig);
void plr_job_fail(plr_job_t *job, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
double plr_now(void);

/* ---- cleanup (plr_cleanup.c) */
int  plr_tmpdir_create(char *path, size_t size);
void plr_tmpdir_remove(const char *path);
void plr_shm_remove(const char *nspace);

/* ---- hosts, mapping and the daemon tree (plr_hosts.c) */
int  plr_hosts_parse_list(const char *spec, plr_host_t **hosts, int *nhosts);
int  plr_hosts_parse_file(const char *path, plr_host_t **hosts, int *nhosts);
/* Fills rank_node for size ranks; drops hosts with no rank.  Returns 0 or -1 (message printed). */
int  plr_hosts_map(plr_opts_t *o, int size, int *rank_node);
int  plr_tree_parent(int node, int fanout);        /* -1: the head */
int  plr_tree_next_hop(int me, int dest, int fanout);  /* child to send to, or -2: parent */

/* ---- multi-host head and daemon (plr_head.c, plr_daemon.c) */
int  plr_head_main(plr_job_t *job, int sig_rd);
int  plr_daemon_main(int argc, char **argv);
void plr_head_signal(plr_job_t *job, int sig);
void plr_head_give_up(plr_job_t *job);
void plr_head_reap(plr_job_t *job);
void plr_daemon_report_exit(plr_job_t *job, plr_rank_t *rk);
void plr_daemon_report_connected(plr_job_t *job, const plr_rank_t *rk);
/* Tells the head when this daemon's ranks change between "one exited
 * without joining" and "joined ones wait" (plr_proc_check_unjoined). */
void plr_daemon_report_join(plr_job_t *job, const plr_rank_t *unjoined, bool waiting);
void plr_daemon_fail(plr_job_t *job, int code, const char *text);
void plr_daemon_event(plr_job_t *job, plr_event_t *ev);   /* takes ev */
int  plr_rank_index(plr_job_t *job, int rank);     /* index in job->ranks, -1 if not here */
/* Extra poll() slots for the network, filled and served by the mode's code. */
int  plr_net_fill(plr_job_t *job, struct pollfd *fds, int max);
void plr_net_handle(plr_job_t *job, struct pollfd *fds, int n);
void plr_net_tick(plr_job_t *job);
int  plr_net_maxfds(plr_job_t *job);

/* ---- shared with the daemon (plaitrun.c) */
char *plr_find_program(const char *name, int *err);
int  plr_job_bindings(plr_job_t *job);

/* ---- main loop (plr_loop.c) */
int  plr_loop_run(plr_job_t *job, int sig_rd);
void plr_loop_events(plr_job_t *job);      /* handle every event already posted */

#endif /* PLR_H */
