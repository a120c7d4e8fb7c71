/* What plaitrun leaves behind must be nothing: its PMIx temp directory
 * (PMIx keeps pmix_dstor_* files there when clients die) and the shared
 * memory segments the ranks' libplait creates in /dev/shm. */
#include "config.h"

#include "launcher/plr.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PLR_OWNER_FILE "owner"   /* in each temp directory: "PID HOST" of its launcher */

static int plr_rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    if (remove(p) != 0)
        fprintf(stderr, PLR_NAME ": warning: cannot remove %s\n", p);
    return 0;
}

void plr_tmpdir_remove(const char *path)
{
    if (path[0] != '\0')
        nftw(path, plr_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* 1 when dir (a plaitrun.XXXXXX of this user) names a launcher of this host
 * (myhost) that no longer exists: one killed outright (SIGKILL, a crash)
 * removes nothing itself. A directory without an owner file, of another
 * host (a shared /tmp) or whose process still exists, pid reuse included,
 * stays. */
static int plr_tmpdir_stale(const char *dir, const char *myhost)
{
    char p[PATH_MAX], host[256];
    long pid = 0;
    int got;
    FILE *f;
    if ((size_t)snprintf(p, sizeof p, "%s/" PLR_OWNER_FILE, dir) >= sizeof p ||
        !(f = fopen(p, "r")))
        return 0;
    got = fscanf(f, "%ld %255s", &pid, host);
    fclose(f);
    if (got != 2 || pid <= 0 || strcmp(host, myhost) != 0)
        return 0;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Removes what launchers of this user on host myhost killed outright left
 * in base. */
static void plr_tmpdir_sweep(const char *base, const char *myhost)
{
    DIR *d = opendir(base);
    struct dirent *e;
    if (!d)
        return;
    while ((e = readdir(d)) != NULL) {
        char p[PATH_MAX];
        struct stat st;
        if (strncmp(e->d_name, "plaitrun.", 9) != 0 || strlen(e->d_name) != 15 ||
            (size_t)snprintf(p, sizeof p, "%s/%s", base, e->d_name) >= sizeof p ||
            lstat(p, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
            !plr_tmpdir_stale(p, myhost))
            continue;
        plr_tmpdir_remove(p);
    }
    closedir(d);
}

/* Unix socket paths are limited to ~108 bytes and PMIx puts its rendezvous
 * socket in this directory, so a long $TMPDIR is not used. Directories of
 * launchers that died without cleaning up are removed first. */
int plr_tmpdir_create(char *path, size_t size)
{
    const char *base = getenv("TMPDIR");
    char owner[PATH_MAX], host[256] = "";
    FILE *f;
    if (base == NULL || base[0] != '/' || strlen(base) > 48 || access(base, W_OK) != 0)
        base = "/tmp";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0])
        snprintf(host, sizeof host, "?");
    else
        plr_tmpdir_sweep(base, host);   /* (a host without a name sweeps nothing) */
    if ((size_t)snprintf(path, size, "%s/plaitrun.XXXXXX", base) >= size || !mkdtemp(path))
        return -1;
    snprintf(owner, sizeof owner, "%s/" PLR_OWNER_FILE, path);
    if ((f = fopen(owner, "w")) != NULL) {
        fprintf(f, "%ld %s\n", (long)getpid(), host);
        fclose(f);
    }
    return 0;
}

/* The library names segments /dev/shm/plait-<TAG>-..., TAG being the
 * namespace with characters outside [A-Za-z0-9._-] made '_' and cut to 40. */
void plr_shm_remove(const char *nspace)
{
    char prefix[64] = "plait-";
    size_t n = strlen(prefix);
    for (size_t i = 0; nspace[i] && i < 40; i++) {
        char c = nspace[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        prefix[n++] = ok ? c : '_';
    }
    prefix[n++] = '-';
    prefix[n] = '\0';

    DIR *d = opendir("/dev/shm");
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, n) != 0)
            continue;
        char p[512];
        snprintf(p, sizeof(p), "/dev/shm/%s", e->d_name);
        unlink(p);
    }
    closedir(d);
}
