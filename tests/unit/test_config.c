/* Unit tests of the settings table (runtime/config.c): every entry parses its
 * own default, malformed values fail naming the variable, sizes/bools/enums. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "runtime/prt.h"
#include "tests/unit/tap.h"

static const prt_cfg_entry_t *find(const char *name)
{
    size_t n;
    const prt_cfg_entry_t *t = prt_cfg_table(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].name, name))
            return &t[i];
    return NULL;
}

static void test_defaults(void)
{
    size_t n;
    const prt_cfg_entry_t *t = prt_cfg_table(&n);
    char buf[64];
    for (size_t i = 0; i < n; i++) {
        TAP_OK(prt_cfg_parse(&t[i], t[i].defval, buf, sizeof buf) == PLAIT_OK,
               "%s default '%s' parses", t[i].name, t[i].defval);
        TAP_OK(t[i].doc && strlen(t[i].doc) > 10 && !strncmp(t[i].name, "PLAIT_", 6),
               "%s has a PLAIT_ name and a doc line", t[i].name);
    }
}

static void test_sizes(void)
{
    const prt_cfg_entry_t *e = find("PLAIT_SHM_EAGER_LIMIT");
    size_t v = 0;
    TAP_OK(e != NULL, "PLAIT_SHM_EAGER_LIMIT is declared");
    if (!e)
        return;
    TAP_OK(prt_cfg_parse(e, "4096", &v, sizeof v) == PLAIT_OK && v == 4096, "size 4096");
    TAP_OK(prt_cfg_parse(e, "16K", &v, sizeof v) == PLAIT_OK && v == 16384, "size 16K");
    TAP_OK(prt_cfg_parse(e, "2m", &v, sizeof v) == PLAIT_OK && v == 2u << 20, "size 2m");
    TAP_OK(prt_cfg_parse(e, "1G", &v, sizeof v) == PLAIT_OK && v == 1u << 30, "size 1G");
    v = 77;
    TAP_OK(prt_cfg_parse(e, "12Q", &v, sizeof v) == PLAIT_ERR_ARG && v == 77, "size 12Q rejected");
    TAP_OK(strstr(plait_last_error(), "PLAIT_SHM_EAGER_LIMIT") != NULL,
           "error names the variable: %s", plait_last_error());
    TAP_OK(prt_cfg_parse(e, "-5", &v, sizeof v) == PLAIT_ERR_ARG, "size -5 rejected");
    TAP_OK(prt_cfg_parse(e, "", &v, sizeof v) == PLAIT_ERR_ARG, "empty size rejected");
    TAP_OK(prt_cfg_parse(e, "99999999999999999999999", &v, sizeof v) == PLAIT_ERR_ARG,
           "overflowing size rejected");
}

static void test_bool_enum_double(void)
{
    const prt_cfg_entry_t *b = find("PLAIT_SHM_CMA"), *l = find("PLAIT_LOG_LEVEL"),
                          *t = find("PLAIT_TIMEOUT");
    int iv = -1;
    double dv = -1;
    TAP_OK(prt_cfg_parse(b, "yes", &iv, sizeof iv) == PLAIT_OK && iv == 1, "bool yes");
    TAP_OK(prt_cfg_parse(b, "OFF", &iv, sizeof iv) == PLAIT_OK && iv == 0, "bool OFF");
    TAP_OK(prt_cfg_parse(b, "2", &iv, sizeof iv) == PLAIT_ERR_ARG, "bool 2 rejected");
    TAP_OK(prt_cfg_parse(l, "debug", &iv, sizeof iv) == PLAIT_OK && iv == PRT_LOG_DEBUG,
           "enum debug = PRT_LOG_DEBUG");
    TAP_OK(prt_cfg_parse(l, "none", &iv, sizeof iv) == PLAIT_OK && iv == PRT_LOG_NONE, "enum none");
    TAP_OK(prt_cfg_parse(l, "deb", &iv, sizeof iv) == PLAIT_ERR_ARG, "enum prefix rejected");
    {   /* an enum with on and off takes 1 and 0 for them, as booleans do */
        const prt_cfg_entry_t *h = find("PLAIT_UDP_TX_HELP");
        int on = -1, off = -1, one = -2, zero = -2;
        TAP_OK(h && prt_cfg_parse(h, "on", &on, sizeof on) == PLAIT_OK &&
               prt_cfg_parse(h, "1", &one, sizeof one) == PLAIT_OK && one == on &&
               prt_cfg_parse(h, "off", &off, sizeof off) == PLAIT_OK &&
               prt_cfg_parse(h, "0", &zero, sizeof zero) == PLAIT_OK && zero == off,
               "enum on/off: 1 and 0 stand for them (PLAIT_UDP_TX_HELP)");
        TAP_OK(prt_cfg_parse(h, "2", &iv, sizeof iv) == PLAIT_ERR_ARG &&
               prt_cfg_parse(l, "1", &iv, sizeof iv) == PLAIT_ERR_ARG,
               "enum: 2, and 1 where no on/off choice exists, rejected");
    }
    TAP_OK(strstr(plait_last_error(), "error|warn") != NULL, "enum error lists the choices: %s",
           plait_last_error());
    TAP_OK(prt_cfg_parse(t, "2.5", &dv, sizeof dv) == PLAIT_OK && dv == 2.5, "double 2.5");
    TAP_OK(prt_cfg_parse(t, "abc", &dv, sizeof dv) == PLAIT_ERR_ARG, "double abc rejected");
    TAP_OK(prt_cfg_parse(t, "-1", &dv, sizeof dv) == PLAIT_ERR_ARG, "negative timeout rejected");
    TAP_OK(prt_cfg_parse(t, "nan", &dv, sizeof dv) == PLAIT_ERR_ARG, "nan timeout rejected");
}

static void test_load(void)
{
    prt_config_t c;
    unsetenv("PLAIT_TIMEOUT");
    TAP_OK(prt_cfg_load(&c) == PLAIT_OK && c.timeout_s == 0 && c.shm_eager_limit == 16384,
           "load with defaults");
    setenv("PLAIT_TIMEOUT", "7", 1);
    setenv("PLAIT_SHM_RING_SLOTS", "128", 1);
    TAP_OK(prt_cfg_load(&c) == PLAIT_OK && c.timeout_s == 7 && c.shm_ring_slots == 128,
           "load reads the environment");
    setenv("PLAIT_SHM_RING_SLOTS", "100", 1);
    TAP_OK(prt_cfg_load(&c) == PLAIT_ERR_ARG &&
           strstr(plait_last_error(), "PLAIT_SHM_RING_SLOTS") != NULL,
           "non power-of-two ring slots rejected: %s", plait_last_error());
    unsetenv("PLAIT_SHM_RING_SLOTS");
    setenv("PLAIT_TIMEOUT", "soon", 1);
    TAP_OK(prt_cfg_load(&c) == PLAIT_ERR_ARG && strstr(plait_last_error(), "PLAIT_TIMEOUT='soon'"),
           "malformed PLAIT_TIMEOUT rejected: %s", plait_last_error());
    /* strtod alone took these (a black-box test): hex, leading blanks */
    setenv("PLAIT_TIMEOUT", "0x10", 1);
    TAP_OK(prt_cfg_load(&c) == PLAIT_ERR_ARG, "PLAIT_TIMEOUT=0x10 rejected: %s", plait_last_error());
    setenv("PLAIT_TIMEOUT", " 5", 1);
    TAP_OK(prt_cfg_load(&c) == PLAIT_ERR_ARG, "PLAIT_TIMEOUT=' 5' rejected: %s", plait_last_error());
    unsetenv("PLAIT_TIMEOUT");
    setenv("PLAIT_UDP_PATHS", " 4", 1);
    TAP_OK(prt_cfg_load(&c) == PLAIT_ERR_ARG, "PLAIT_UDP_PATHS=' 4' rejected: %s", plait_last_error());
    unsetenv("PLAIT_UDP_PATHS");
    /* the collectives of one algorithm have settings too: a wrong name fails */
    setenv("PLAIT_GATHER_ALGO", "bogus", 1);
    TAP_OK(prt_cfg_load(&c) == PLAIT_ERR_ARG && strstr(plait_last_error(), "auto|binomial"),
           "PLAIT_GATHER_ALGO=bogus rejected: %s", plait_last_error());
    unsetenv("PLAIT_GATHER_ALGO");
    setenv("PLAIT_BARRIER_ALGO", "dissemination", 1);
    TAP_OK(prt_cfg_load(&c) == PLAIT_OK && c.barrier_algo == 1, "PLAIT_BARRIER_ALGO=dissemination");
    unsetenv("PLAIT_BARRIER_ALGO");
    setenv("PLAIT_TRACE", "/nonexistent-plait-dir", 1);
    TAP_OK(prt_cfg_load(&c) == PLAIT_ERR_ARG && strstr(plait_last_error(), "PLAIT_TRACE"),
           "PLAIT_TRACE naming no directory rejected by the settings: %s", plait_last_error());
    unsetenv("PLAIT_TRACE");
    unsetenv("PLAIT_TIMEOUT");
    setenv("PLAIT_COLL_SHM_SMALL", "64M", 1);
    TAP_OK(prt_cfg_load(&c) == PLAIT_ERR_ARG && strstr(plait_last_error(), "PLAIT_COLL_SHM_SMALL"),
           "PLAIT_COLL_SHM_SMALL above 1M rejected: %s", plait_last_error());
    unsetenv("PLAIT_COLL_SHM_SMALL");
    setenv("PLAIT_COLL_PIPE", "4K", 1);
    TAP_OK(prt_cfg_load(&c) == PLAIT_ERR_ARG && strstr(plait_last_error(), "PLAIT_COLL_PIPE"),
           "PLAIT_COLL_PIPE below 16K rejected: %s", plait_last_error());
    setenv("PLAIT_COLL_PIPE", "17179869184G", 1);   /* 2^64 bytes: wrapped to 0 (off) */
    TAP_OK(prt_cfg_load(&c) == PLAIT_ERR_ARG && strstr(plait_last_error(), "PLAIT_COLL_PIPE"),
           "a size that overflows is rejected, not wrapped: %s", plait_last_error());
    setenv("PLAIT_COLL_PIPE", "0", 1);
    TAP_OK(prt_cfg_load(&c) == PLAIT_OK && c.coll_pipe == 0, "PLAIT_COLL_PIPE=0 turns it off");
    unsetenv("PLAIT_COLL_PIPE");
}

/* A misspelt setting is ignored; the name nearest to it is suggested, and
 * the scripts' own PLAIT_* variables are not taken for typos. */
static void suggest_is(const char *name, const char *want)
{
    const char *got = prt_cfg_suggest(name);
    TAP_OK(got && !strcmp(got, want), "%s: did you mean %s (got %s)", name, want,
           got ? got : "none");
}

static void test_suggest(void)
{
    suggest_is("PLAIT_TIMEOUTT", "PLAIT_TIMEOUT");
    suggest_is("PLAIT_LOG_LEVL", "PLAIT_LOG_LEVEL");
    suggest_is("PLAIT_CCC", "PLAIT_CC");
    TAP_OK(!prt_cfg_suggest("PLAIT_TIMEOUT") && !prt_cfg_suggest("PLAIT_BUILDDIR") &&
           !prt_cfg_suggest("PLAIT_TEST_NP") && !prt_cfg_suggest("PLAIT_OK") &&
           !prt_cfg_suggest("OTHER_TIMEOUT") && !prt_cfg_suggest("PLAIT_PEERS_TAG"),
           "no suggestion for a setting, other PLAIT_* names, or other prefixes");
}

int main(void)
{
    prt_log_set_level(PRT_LOG_NONE);
    test_defaults();
    test_sizes();
    test_bool_enum_double();
    test_load();
    test_suggest();
    return tap_done();
}
