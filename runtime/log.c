/* log.c -- leveled logging to stderr with a rank prefix; one write per line so
 * lines of concurrent threads and ranks never interleave. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/prt.h"

/* Process-wide, set once at bootstrap; read racily by design (ints). */
static int prt_log_rank_ = -1;
static int prt_log_level_ = PRT_LOG_WARN;

void prt_log_set_rank(int rank) { prt_log_rank_ = rank; }
void prt_log_set_level(int level) { prt_log_level_ = level; }
int  prt_log_level(void) { return prt_log_level_; }

void prt_log(int level, const char *fmt, ...)
{
    static const char *names[] = {"", "error", "warning", "info", "debug", "trace"};
    char line[1024];
    int n;
    va_list ap;

    if (level > prt_log_level_ || level <= PRT_LOG_NONE)
        return;
    if (prt_log_rank_ >= 0)
        n = snprintf(line, sizeof line, "plait[%d] %s: ", prt_log_rank_, names[level]);
    else
        n = snprintf(line, sizeof line, "plait[%d] %s: ", (int)getpid(), names[level]);
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, (size_t)n) < 0) { /* nothing sane to do */ }
}
