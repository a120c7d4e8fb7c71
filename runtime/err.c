/* err.c -- result codes and per-thread error detail (plait_last_error). */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>

#include "runtime/prt.h"

/* Per-thread detail: a thread that fails reads its own message, never
 * another's. Side 0 is what plait_last_error shows; side 1 takes the
 * errors made while the thread works for others (prt_err_divert): a
 * progress pass that fails another thread's request writes its detail
 * there, and the request keeps a copy, so this thread's own last failure
 * stays as it was. */
static _Thread_local char prt_err_buf[2][512];
static _Thread_local int prt_err_side;

int prt_err(int code, const char *fmt, ...)
{
    char *buf = prt_err_buf[prt_err_side];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof prt_err_buf[0], fmt, ap);
    va_end(ap);
    prt_log(PRT_LOG_DEBUG, "error %s: %s", plait_strerror(code), buf);
    return code;
}

const char *prt_err_text(void) { return prt_err_buf[prt_err_side]; }

const char *plait_last_error(void) { return prt_err_buf[0]; }

int prt_err_divert(void)
{
    int was = prt_err_side;
    prt_err_side = 1;
    return was;
}

void prt_err_undivert(int was) { prt_err_side = was; }

void prt_err_waited(int code, uint64_t t0_ns, const char *what)
{
    uint64_t waited = prt_now_ns() - t0_ns;
    char text[sizeof prt_err_buf[0]];
    if (waited <= 500000000u)
        return;
    snprintf(text, sizeof text, "%s", prt_err_text());
    prt_err(code, "%s; then %.1f s %s", text, (double)waited * 1e-9, what);
}

const char *plait_strerror(int result)
{
    switch (result) {
    case PLAIT_OK:              return "success";
    case PLAIT_ERR_ARG:         return "invalid argument";
    case PLAIT_ERR_NOMEM:       return "out of memory";
    case PLAIT_ERR_TRUNCATE:    return "message truncated: larger than the receive buffer";
    case PLAIT_ERR_TIMEOUT:     return "timed out";
    case PLAIT_ERR_PEER:        return "a peer process died or the job is aborting";
    case PLAIT_ERR_TRANSPORT:   return "transport failure";
    case PLAIT_ERR_UNSUPPORTED: return "not supported by this build or machine";
    case PLAIT_ERR_STATE:       return "invalid state: not initialized, finalized or freed object";
    case PLAIT_ERR_INTERNAL:    return "internal error";
    default:                    return "unknown error";
    }
}
