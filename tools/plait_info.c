/*
 * plait_info -- what this plait build is and how this environment sets it up:
 * version and build options, the transports built in (and whether each can run
 * on this machine), the machine topology (hwloc), and every PLAIT_* setting
 * with its type, default, current value and documentation.
 *
 * It never calls plait_init, so it runs anywhere, without a launcher. A
 * setting whose environment value does not parse is printed as invalid and
 * makes plait_info exit with status 1: the library would refuse to start with
 * it, and the user should learn that here first.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PLAIT_HAVE_HWLOC
#include <hwloc.h>
#endif

#include "plait.h"
#include "coll/pcoll.h"
#include "runtime/prt.h"
#include "transport/ptl.h"

#define PTOOL_PROG "plait_info"

enum { PTOOL_FMT_TEXT, PTOOL_FMT_PARSABLE, PTOOL_FMT_JSON };
enum { PTOOL_SRC_DEFAULT, PTOOL_SRC_ENV, PTOOL_SRC_INVALID };

/* One setting as this environment sets it. */
typedef struct {
    const prt_cfg_entry_t *e;
    const char *current;         /* value in effect (text), or the rejected text */
    int         source;          /* PTOOL_SRC_* */
    char        error[256];      /* PTOOL_SRC_INVALID: why */
} ptool_setting_t;

typedef struct {
    const char *name, *desc;
    int         usable;
    char        why[256];
} ptool_transport_t;

typedef struct {
    int  available;              /* 0: built without hwloc, or hwloc failed */
    char note[128];              /* why not available */
    char version[32];
    int  packages, numa_nodes, cores, pus;
    unsigned long long memory;   /* bytes, 0 = unknown */
    char bound[256];             /* PUs this process may run on */
} ptool_topo_t;

typedef struct {
    char               version[32];
    ptool_setting_t   *settings;
    size_t             nsettings;
    int                ninvalid;
    char               general_error[256];  /* a rejection no single setting owns */
    ptool_transport_t *transports;
    size_t             ntransports;
    ptool_topo_t       topo;
} ptool_info_t;

/* ------------------------------------------------------------- gathering */

/*
 * Parses one environment value with the library's own parser, so plait_info
 * accepts and rejects exactly what plait_init would. The buffer is large and
 * aligned enough for every setting type; strings get the room the library's
 * config field has.
 */
static void ptool_setting_eval(ptool_setting_t *s, const prt_cfg_entry_t *e)
{
    union {
        long double align;
        char        text[512];
    } out;
    const char *env = getenv(e->name);
    size_t outlen = e->size && e->size < sizeof(out) ? e->size : sizeof(out);
    int rc;

    s->e = e;
    s->error[0] = '\0';
    if (env == NULL) {
        s->current = e->defval ? e->defval : "";
        s->source = PTOOL_SRC_DEFAULT;
        return;
    }
    s->current = env;
    memset(&out, 0, sizeof(out));
    rc = prt_cfg_parse(e, env, &out, outlen);
    if (rc == PLAIT_OK) {
        s->source = PTOOL_SRC_ENV;
        return;
    }
    s->source = PTOOL_SRC_INVALID;
    snprintf(s->error, sizeof(s->error), "%s",
             plait_last_error()[0] ? plait_last_error() : plait_strerror(rc));
}

/*
 * Values that parse one by one may still be refused together (limits such as
 * "a power of two" are checked by prt_cfg_load). Loading the whole table the
 * way plait_init does catches those; the message names the variable, which
 * tells which setting to mark.
 */
static void ptool_settings_crosscheck(ptool_info_t *in)
{
    prt_config_t cfg;
    const char *msg;

    if (in->ninvalid != 0 || prt_cfg_load(&cfg) == PLAIT_OK)
        return;
    msg = plait_last_error();
    for (size_t i = 0; i < in->nsettings; i++) {
        ptool_setting_t *s = &in->settings[i];
        size_t len = strlen(s->e->name);
        const char *hit = strstr(msg, s->e->name);

        if (hit && (hit[len] == '=' || hit[len] == ' ' || hit[len] == '\0')) {
            s->source = PTOOL_SRC_INVALID;
            snprintf(s->error, sizeof(s->error), "%s", msg);
            in->ninvalid++;
            return;
        }
    }
    snprintf(in->general_error, sizeof(in->general_error), "%s", msg[0] ? msg : "settings rejected");
}

static int ptool_settings_gather(ptool_info_t *in)
{
    const prt_cfg_entry_t *table = prt_cfg_table(&in->nsettings);

    in->settings = calloc(in->nsettings ? in->nsettings : 1, sizeof(*in->settings));
    if (!in->settings)
        return -1;
    for (size_t i = 0; i < in->nsettings; i++) {
        ptool_setting_eval(&in->settings[i], &table[i]);
        in->ninvalid += in->settings[i].source == PTOOL_SRC_INVALID;
    }
    ptool_settings_crosscheck(in);
    return 0;
}

static int ptool_transports_gather(ptool_info_t *in)
{
    const ptl_component_t *const *comps = ptl_components(&in->ntransports);

    in->transports = calloc(in->ntransports ? in->ntransports : 1, sizeof(*in->transports));
    if (!in->transports)
        return -1;
    for (size_t i = 0; i < in->ntransports; i++) {
        ptool_transport_t *t = &in->transports[i];

        t->name = comps[i]->name;
        t->desc = comps[i]->desc;
        t->usable = comps[i]->usable ? comps[i]->usable(t->why, sizeof(t->why)) : 1;
        if (t->usable)
            t->why[0] = '\0';
    }
    return 0;
}

#ifdef PLAIT_HAVE_HWLOC
static void ptool_topo_fill(ptool_topo_t *tp, hwloc_topology_t topo)
{
    hwloc_obj_t root = hwloc_get_root_obj(topo);
    hwloc_bitmap_t set = hwloc_bitmap_alloc();

    tp->packages = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PACKAGE);
    tp->numa_nodes = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    tp->cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    tp->pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    tp->memory = root ? (unsigned long long)root->total_memory : 0;
    snprintf(tp->bound, sizeof(tp->bound), "unknown");
    /* the binding a launcher gave us is worth seeing next to the machine */
    if (set && hwloc_get_cpubind(topo, set, HWLOC_CPUBIND_PROCESS) == 0)
        hwloc_bitmap_list_snprintf(tp->bound, sizeof(tp->bound), set);
    hwloc_bitmap_free(set);
}
#endif

static void ptool_topo_gather(ptool_topo_t *tp)
{
#ifdef PLAIT_HAVE_HWLOC
    hwloc_topology_t topo;
    unsigned v = hwloc_get_api_version();

    snprintf(tp->version, sizeof(tp->version), "%u.%u.%u", v >> 16, (v >> 8) & 0xff, v & 0xff);
    if (hwloc_topology_init(&topo) != 0) {
        snprintf(tp->note, sizeof(tp->note), "hwloc_topology_init failed");
        return;
    }
    if (hwloc_topology_load(topo) != 0) {
        snprintf(tp->note, sizeof(tp->note), "hwloc_topology_load failed");
        hwloc_topology_destroy(topo);
        return;
    }
    ptool_topo_fill(tp, topo);
    tp->available = 1;
    hwloc_topology_destroy(topo);
#else
    snprintf(tp->note, sizeof(tp->note), "built without hwloc");
#endif
}

static int ptool_gather(ptool_info_t *in, int want_all)
{
    int major = 0, minor = 0, patch = 0;

    memset(in, 0, sizeof(*in));
    plait_version(&major, &minor, &patch);
    snprintf(in->version, sizeof(in->version), "%d.%d.%d", major, minor, patch);
    if (ptool_settings_gather(in) != 0)
        return -1;
    if (!want_all)
        return 0;
    if (ptool_transports_gather(in) != 0)
        return -1;
    ptool_topo_gather(&in->topo);
    return 0;
}

/* ----------------------------------------------------------- text output */

static const char *ptool_source_name(int source)
{
    return source == PTOOL_SRC_ENV ? "environment"
         : source == PTOOL_SRC_INVALID ? "INVALID" : "default";
}

static void ptool_text_build(const ptool_info_t *in)
{
    printf("plait %s\n", in->version);
    printf("  build options : %s\n", PLAIT_BUILD_OPTIONS);
    printf("  compiler      : %s\n", PLAIT_BUILD_CC);
}

static void ptool_text_transports(const ptool_info_t *in)
{
    printf("\nTransports (built in; usable on this machine?):\n");
    for (size_t i = 0; i < in->ntransports; i++) {
        const ptool_transport_t *t = &in->transports[i];

        printf("  %-10s %-8s %s", t->name, t->usable ? "yes" : "no", t->desc ? t->desc : "");
        if (!t->usable)
            printf(" (%s)", t->why[0] ? t->why : "no reason given");
        printf("\n");
    }
    if (in->ntransports == 0)
        printf("  (none)\n");
}

static void ptool_text_topo(const ptool_topo_t *tp)
{
    if (!tp->available) {
        printf("\nTopology: not available (%s)\n", tp->note);
        return;
    }
    printf("\nTopology (hwloc API %s):\n", tp->version);
    printf("  packages %d, NUMA nodes %d, cores %d, hardware threads %d\n", tp->packages,
           tp->numa_nodes, tp->cores, tp->pus);
    if (tp->memory)
        printf("  memory %.1f GiB\n", (double)tp->memory / (1024.0 * 1024.0 * 1024.0));
    printf("  this process may run on PUs %s\n", tp->bound);
}

static void ptool_text_settings(const ptool_info_t *in)
{
    printf("\nSettings (environment variables; current = value in this environment):\n");
    for (size_t i = 0; i < in->nsettings; i++) {
        const ptool_setting_t *s = &in->settings[i];
        const prt_cfg_entry_t *e = s->e;

        printf("  %-24s %-7s default %-10s current %s (%s)\n", e->name,
               prt_cfg_type_name(e->type), e->defval && e->defval[0] ? e->defval : "\"\"",
               s->current[0] ? s->current : "\"\"", ptool_source_name(s->source));
        printf("      %s\n", e->doc ? e->doc : "");
        if (e->choices)
            printf("      choices: %s\n", e->choices);
        if (s->source == PTOOL_SRC_INVALID)
            printf("      error: %s\n", s->error);
    }
}

/* ------------------------------------------------------- parsable output */

/* One "key:value" record per line (ompi_info --parsable style); values are
 * printed as they are, so split on the first fields only. */
static void ptool_parsable(const ptool_info_t *in, int all)
{
    if (all) {
        printf("version:%s\n", in->version);
        printf("build:options:%s\n", PLAIT_BUILD_OPTIONS);
        printf("build:cc:%s\n", PLAIT_BUILD_CC);
        for (size_t i = 0; i < in->ntransports; i++) {
            const ptool_transport_t *t = &in->transports[i];

            printf("transport:%s:desc:%s\n", t->name, t->desc ? t->desc : "");
            printf("transport:%s:usable:%s\n", t->name, t->usable ? "yes" : "no");
            if (!t->usable)
                printf("transport:%s:why:%s\n", t->name, t->why);
        }
        printf("topology:available:%s\n", in->topo.available ? "yes" : "no");
        if (in->topo.available)
            printf("topology:packages:%d\ntopology:numa_nodes:%d\ntopology:cores:%d\n"
                   "topology:pus:%d\ntopology:memory:%llu\ntopology:bound:%s\n",
                   in->topo.packages, in->topo.numa_nodes, in->topo.cores, in->topo.pus,
                   in->topo.memory, in->topo.bound);
    }
    for (size_t i = 0; i < in->nsettings; i++) {
        const ptool_setting_t *s = &in->settings[i];
        const char *n = s->e->name;

        printf("setting:%s:type:%s\n", n, prt_cfg_type_name(s->e->type));
        printf("setting:%s:default:%s\n", n, s->e->defval ? s->e->defval : "");
        printf("setting:%s:current:%s\n", n, s->current);
        printf("setting:%s:source:%s\n", n, s->source == PTOOL_SRC_INVALID ? "invalid"
                                            : s->source == PTOOL_SRC_ENV ? "environment"
                                                                        : "default");
        if (s->e->choices)
            printf("setting:%s:choices:%s\n", n, s->e->choices);
        printf("setting:%s:doc:%s\n", n, s->e->doc ? s->e->doc : "");
        if (s->source == PTOOL_SRC_INVALID)
            printf("setting:%s:error:%s\n", n, s->error);
    }
}

/* ----------------------------------------------------------- JSON output */

static void ptool_json_str(const char *s)
{
    putchar('"');
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;

        if (ch == '"' || ch == '\\')
            printf("\\%c", ch);
        else if (ch < 0x20)
            printf("\\u%04x", ch);
        else
            putchar(ch);
    }
    putchar('"');
}

/* "key": "value" with JSON escaping; sep is printed first. */
static void ptool_json_kv(const char *sep, const char *key, const char *value)
{
    printf("%s\"%s\": ", sep, key);
    ptool_json_str(value);
}

static void ptool_json_transports(const ptool_info_t *in)
{
    printf(",\n  \"transports\": [");
    for (size_t i = 0; i < in->ntransports; i++) {
        const ptool_transport_t *t = &in->transports[i];

        printf("%s\n    {", i ? "," : "");
        ptool_json_kv("", "name", t->name);
        ptool_json_kv(", ", "desc", t->desc);
        printf(", \"usable\": %s", t->usable ? "true" : "false");
        if (!t->usable)
            ptool_json_kv(", ", "why", t->why);
        printf("}");
    }
    printf("\n  ]");
}

static void ptool_json_topo(const ptool_topo_t *tp)
{
    printf(",\n  \"topology\": {\"available\": %s", tp->available ? "true" : "false");
    if (tp->available) {
        ptool_json_kv(", ", "hwloc", tp->version);
        printf(", \"packages\": %d, \"numa_nodes\": %d, \"cores\": %d, \"pus\": %d, "
               "\"memory\": %llu", tp->packages, tp->numa_nodes, tp->cores, tp->pus, tp->memory);
        ptool_json_kv(", ", "bound", tp->bound);
    } else {
        ptool_json_kv(", ", "note", tp->note);
    }
    printf("}");
}

static void ptool_json_settings(const ptool_info_t *in)
{
    printf(",\n  \"settings\": [");
    for (size_t i = 0; i < in->nsettings; i++) {
        const ptool_setting_t *s = &in->settings[i];

        printf("%s\n    {", i ? "," : "");
        ptool_json_kv("", "name", s->e->name);
        ptool_json_kv(", ", "type", prt_cfg_type_name(s->e->type));
        ptool_json_kv(", ", "default", s->e->defval);
        ptool_json_kv(", ", "current", s->current);
        ptool_json_kv(", ", "source", s->source == PTOOL_SRC_INVALID ? "invalid"
                                      : s->source == PTOOL_SRC_ENV ? "environment" : "default");
        if (s->e->choices)
            ptool_json_kv(", ", "choices", s->e->choices);
        ptool_json_kv(", ", "doc", s->e->doc);
        if (s->source == PTOOL_SRC_INVALID)
            ptool_json_kv(", ", "error", s->error);
        printf("}");
    }
    printf("\n  ]");
}

static void ptool_json(const ptool_info_t *in, int all)
{
    printf("{\n");
    ptool_json_kv("  ", "version", in->version);
    if (all) {
        ptool_json_kv(",\n  ", "build_options", PLAIT_BUILD_OPTIONS);
        ptool_json_kv(",\n  ", "compiler", PLAIT_BUILD_CC);
        ptool_json_transports(in);
        ptool_json_topo(&in->topo);
    }
    ptool_json_settings(in);
    printf("\n}\n");
}

/* ------------------------------------------------------------------ main */

static void ptool_usage(FILE *out)
{
    fprintf(out,
        "Usage: %s [options]\n"
        "Shows the plait build, its transports, this machine's topology and every\n"
        "PLAIT_* setting (type, default, value in this environment, documentation).\n"
        "Needs no launcher. Exits with status 1 when a PLAIT_* variable in the\n"
        "environment holds a value the library would reject.\n"
        "\n"
        "  -s, --settings   only the settings\n"
        "  -a, --algorithms only the collectives' algorithm selection table (text; not\n"
        "                   with -s, -p or -j)\n"
        "  -p, --parsable   one key:value record per line\n"
        "  -j, --json       JSON on stdout\n"
        "  -V, --version    print the version and exit\n"
        "  -h, --help       this text\n",
        PTOOL_PROG);
}

static void ptool_print_version(void)
{
    int major = 0, minor = 0, patch = 0;

    plait_version(&major, &minor, &patch);
    printf("%s (plait) %d.%d.%d\n", PTOOL_PROG, major, minor, patch);
}

/* Reports rejected settings on stderr, naming each variable. */
static void ptool_report_invalid(const ptool_info_t *in)
{
    if (in->general_error[0])
        fprintf(stderr, "%s: the settings are refused: %s\n", PTOOL_PROG, in->general_error);
    for (size_t i = 0; i < in->nsettings; i++) {
        const ptool_setting_t *s = &in->settings[i];

        if (s->source != PTOOL_SRC_INVALID)
            continue;
        if (strstr(s->error, s->e->name))     /* the library's message names it already */
            fprintf(stderr, "%s: %s\n", PTOOL_PROG, s->error);
        else
            fprintf(stderr, "%s: invalid value '%s' for %s: %s\n", PTOOL_PROG, s->current,
                    s->e->name, s->error);
    }
}

/* The collectives' algorithm selection table (coll/select.c), after a blank
 * line when it follows the rest. */
static void ptool_text_algorithms(int after_rest)
{
    if (after_rest)
        printf("\n");
    fflush(stdout);
    pcoll_selection_print(stdout);
}

static void ptool_print(const ptool_info_t *in, int fmt, int all)
{
    if (fmt == PTOOL_FMT_JSON) {
        ptool_json(in, all);
        return;
    }
    if (fmt == PTOOL_FMT_PARSABLE) {
        ptool_parsable(in, all);
        return;
    }
    if (all) {
        ptool_text_build(in);
        ptool_text_transports(in);
        ptool_text_topo(&in->topo);
    }
    ptool_text_settings(in);
    if (all)
        ptool_text_algorithms(1);
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"settings", no_argument, NULL, 's'}, {"parsable", no_argument, NULL, 'p'},
        {"json", no_argument, NULL, 'j'},     {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},     {"algorithms", no_argument, NULL, 'a'},
        {NULL, 0, NULL, 0}};
    int c, fmt = PTOOL_FMT_TEXT, all = 1, algos = 0;
    ptool_info_t info;

    while ((c = getopt_long(argc, argv, "spjVha", longopts, NULL)) != -1) {
        switch (c) {
        case 'a': algos = 1; break;
        case 's': all = 0; break;
        case 'p': fmt = PTOOL_FMT_PARSABLE; break;
        case 'j': fmt = PTOOL_FMT_JSON; break;
        case 'V': ptool_print_version(); return 0;
        case 'h': ptool_usage(stdout); return 0;
        default:  fprintf(stderr, "Try '%s --help'.\n", PTOOL_PROG); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "%s: unexpected argument '%s'\nTry '%s --help'.\n", PTOOL_PROG,
                argv[optind], PTOOL_PROG);
        return 2;
    }
    if (algos && (fmt != PTOOL_FMT_TEXT || !all)) {
        fprintf(stderr, "%s: -a prints the algorithm table as text; it does not combine with "
                "-s, -p or -j\nTry '%s --help'.\n", PTOOL_PROG, PTOOL_PROG);
        return 2;
    }
    if (ptool_gather(&info, all && !algos) != 0) {
        fprintf(stderr, "%s: out of memory\n", PTOOL_PROG);
        return 1;
    }
    if (algos)
        ptool_text_algorithms(0);   /* the settings are still checked below */
    else
        ptool_print(&info, fmt, all);
    fflush(stdout);
    ptool_report_invalid(&info);
    prt_cfg_warn_typos();   /* a misspelt setting, as plait_init warns of it */
    free(info.settings);
    free(info.transports);
    return info.ninvalid || info.general_error[0] ? 1 : 0;
}
