/* Forwarding of the ranks' stdout/stderr and of plaitrun's stdin.
 *
 * Each rank stream has its own buffer; only complete lines leave it, and all
 * complete lines of one read leave in one write(), so output of different
 * ranks never interleaves inside a line.  A partial last line waits for its
 * newline, for EOF, or until it exceeds PLR_LINE_MAX (then it is cut there,
 * the one case where a line is split). A tail left at EOF is ended with a
 * newline. */
#include "config.h"

#include "launcher/plr.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PLR_READ_CHUNK (64 * 1024)
#define PLR_LINE_MAX   (1024 * 1024)

static bool plr_out_broken[3];   /* our stdout/stderr reader went away: discard */

/* Set on a daemon: its ranks' lines go to the head, untagged (the head tags). */
void (*plr_stream_sink)(plr_stream_t *s, const char *p, size_t n);

/* Writes everything (loops over short writes; waits if the fd is non-blocking). */
void plr_write_all(int fd, const char *p, size_t n)
{
    if (fd >= 0 && fd < 3 && plr_out_broken[fd])
        return;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EAGAIN) {
            struct pollfd pfd = { .fd = fd, .events = POLLOUT };
            poll(&pfd, 1, 100);
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else {
            if (fd >= 0 && fd < 3)
                plr_out_broken[fd] = true;   /* EPIPE etc.: nobody reads any more */
            return;
        }
    }
}

void plr_stream_init(plr_stream_t *s, int fd, int out_fd, int rank)
{
    s->fd = fd;
    s->out_fd = out_fd;
    s->rank = rank;
    s->buf = NULL;
    s->len = s->cap = 0;
}

void plr_stream_free(plr_stream_t *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
    free(s->buf);
    s->buf = NULL;
    s->len = s->cap = 0;
}

/* Emits buf[0..n) which holds whole lines (or a forced tail when
 * add_newline), prefixing every line with "[rank] " when tagging. */
static void plr_stream_emit(plr_stream_t *s, size_t n, bool tag, bool add_newline)
{
    if (n == 0)
        return;
    if (plr_stream_sink) {
        plr_stream_sink(s, s->buf, n);
        return;
    }
    if (!tag) {
        plr_write_all(s->out_fd, s->buf, n);
        return;
    }
    char prefix[24];
    int plen = snprintf(prefix, sizeof(prefix), "[%d] ", s->rank);
    size_t lines = add_newline ? 1 : 0;
    for (size_t i = 0; i < n; i++)
        lines += s->buf[i] == '\n';
    size_t olen = 0, ocap = n + lines * (size_t)plen + 1;
    char *o = malloc(ocap);
    if (o == NULL) {
        plr_write_all(s->out_fd, s->buf, n);
        return;
    }
    bool at_start = true;
    for (size_t i = 0; i < n; i++) {
        if (at_start) {
            memcpy(o + olen, prefix, (size_t)plen);
            olen += (size_t)plen;
        }
        o[olen++] = s->buf[i];
        at_start = s->buf[i] == '\n';
    }
    if (add_newline && !at_start)
        o[olen++] = '\n';
    plr_write_all(s->out_fd, o, olen);
    free(o);
}

/* Sends the complete lines out and keeps the partial tail. */
static void plr_stream_flush_lines(plr_stream_t *s, bool tag)
{
    size_t n = s->len;
    while (n > 0 && s->buf[n - 1] != '\n')
        n--;
    if (n == 0 && s->len >= PLR_LINE_MAX)
        n = s->len;                        /* a line too long to hold: cut it */
    if (n == 0)
        return;
    plr_stream_emit(s, n, tag, n == s->len && s->buf[n - 1] != '\n');
    memmove(s->buf, s->buf + n, s->len - n);
    s->len -= n;
}

/* A rank's last, unfinished line: ended with a newline (tagging adds it
 * already), so the next rank's output starts on a line of its own instead
 * of continuing this one. */
static void plr_stream_emit_tail(plr_stream_t *s, bool tag)
{
    plr_stream_emit(s, s->len, tag, true);
    if (!tag && !plr_stream_sink && s->len && s->buf[s->len - 1] != '\n')
        plr_write_all(s->out_fd, "\n", 1);
    s->len = 0;
}

static void plr_stream_eof(plr_stream_t *s, bool tag)
{
    plr_stream_emit_tail(s, tag);   /* the partial tail, if any */
    close(s->fd);
    s->fd = -1;
}

static bool plr_stream_reserve(plr_stream_t *s)
{
    if (s->cap - s->len >= PLR_READ_CHUNK)
        return true;
    size_t cap = s->len + PLR_READ_CHUNK;
    char *b = realloc(s->buf, cap);
    if (b == NULL)
        return false;
    s->buf = b;
    s->cap = cap;
    return true;
}

/* One read: 1 data taken, 0 EOF (flushed and closed), -1 nothing now. */
static int plr_stream_read_once(plr_stream_t *s, bool tag)
{
    if (!plr_stream_reserve(s)) {
        plr_stream_flush_lines(s, tag);
        return -1;
    }
    ssize_t n = read(s->fd, s->buf + s->len, s->cap - s->len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return -1;
    if (n <= 0) {
        plr_stream_eof(s, tag);
        return 0;
    }
    s->len += (size_t)n;
    plr_stream_flush_lines(s, tag);
    return 1;
}

/* The head's copy of a remote rank's stream: the daemon sends whole lines
 * and, at the rank's exit, a possibly partial tail. */
void plr_stream_feed(plr_stream_t *s, const char *p, size_t n, bool tag)
{
    if (s->cap - s->len < n) {
        char *b = realloc(s->buf, s->len + n);
        if (b == NULL)
            return;
        s->buf = b;
        s->cap = s->len + n;
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
    plr_stream_flush_lines(s, tag);
}

void plr_stream_flush_tail(plr_stream_t *s, bool tag)
{
    plr_stream_emit_tail(s, tag);
}

bool plr_stream_read(plr_stream_t *s, bool tag)
{
    if (s->fd < 0)
        return false;
    return plr_stream_read_once(s, tag) != 0;
}

/* After the rank was reaped: take whatever is still in the pipe without
 * waiting for writers it may have left behind, then close. */
void plr_stream_drain(plr_stream_t *s, bool tag)
{
    if (s->fd < 0)
        return;
    int fl = fcntl(s->fd, F_GETFL);
    fcntl(s->fd, F_SETFL, fl | O_NONBLOCK);
    int rc;
    while ((rc = plr_stream_read_once(s, tag)) > 0)
        ;
    if (rc < 0)
        plr_stream_eof(s, tag);
}

/* ------------------------------------------------------------ stdin -> rank 0 */

void plr_stdin_init(plr_stdin_t *in, int pipe_fd)
{
    in->in_fd = 0;
    in->pipe_fd = pipe_fd;
    in->len = in->off = 0;
    if (pipe_fd >= 0) {
        int fl = fcntl(pipe_fd, F_GETFL);
        fcntl(pipe_fd, F_SETFL, fl | O_NONBLOCK);
    }
    if (fcntl(0, F_GETFD) < 0 || pipe_fd < 0)
        in->in_fd = -1;
    /* Reading a terminal from a background job stops us (SIGTTIN): then
     * rank 0 just sees EOF. */
    if (in->in_fd == 0 && isatty(0) && tcgetpgrp(0) != getpgrp())
        plr_stdin_close(in);
}

void plr_stdin_close(plr_stdin_t *in)
{
    if (in->pipe_fd >= 0)
        close(in->pipe_fd);
    in->pipe_fd = -1;
    in->in_fd = -1;
    in->len = in->off = 0;
}

/* plaitrun's stdin is readable (poll said so; it is not made non-blocking
 * because the terminal or file description is shared with the caller). */
void plr_stdin_on_input(plr_stdin_t *in)
{
    ssize_t n = read(in->in_fd, in->buf, sizeof(in->buf));
    if (n < 0 && errno == EINTR)
        return;
    if (n <= 0) {                          /* EOF or error: rank 0 sees EOF */
        in->in_fd = -1;
        if (in->len == in->off)
            plr_stdin_close(in);
        return;
    }
    in->len = (size_t)n;
    in->off = 0;
    plr_stdin_on_writable(in);
}

void plr_stdin_on_writable(plr_stdin_t *in)
{
    while (in->off < in->len) {
        ssize_t w = write(in->pipe_fd, in->buf + in->off, in->len - in->off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN)
            return;
        if (w < 0) {                       /* rank 0 closed its stdin or exited */
            plr_stdin_close(in);
            return;
        }
        in->off += (size_t)w;
    }
    in->len = in->off = 0;
    if (in->in_fd < 0)
        plr_stdin_close(in);
}
