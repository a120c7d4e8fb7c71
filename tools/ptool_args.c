/* ptool_args.c -- command-line value parsing shared by the benchmark methods. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ptool_args.h"

int ptool_parse_size(const char *s, size_t limit, size_t *out)
{
    char *end;
    unsigned long long v;
    size_t mult = 1;

    if (*s == '\0' || *s == '-' || *s == '+')
        return -1;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end == s)
        return -1;
    switch (*end) {
    case 'k': case 'K': mult = (size_t)1 << 10; end++; break;
    case 'm': case 'M': mult = (size_t)1 << 20; end++; break;
    case 'g': case 'G': mult = (size_t)1 << 30; end++; break;
    default: break;
    }
    if (mult > 1 && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0))
        end += strlen(end);
    else if (mult == 1 && strcmp(end, "B") == 0)
        end++;
    if (*end != '\0' || v > limit / mult)
        return -1;
    *out = (size_t)v * mult;
    return 0;
}

int ptool_parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

void ptool_arg_error(FILE *err, const char *prog, const char *fmt, const char *arg)
{
    if (!err)
        return;
    fprintf(err, "%s: ", prog);
    fprintf(err, fmt, arg);
    fprintf(err, "\nTry '%s --help'.\n", prog);
}
