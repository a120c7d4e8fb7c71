/* What plaitrun leaves behind must be nothing: its PMIx temp directory
 * (PMIx keeps pmix_dstor_* files there when clients die) and the shared
 * memory segments the ranks' libplait creates in /dev/shm. */
#include "config.h"

#include "launcher/plr.h"

#include <dirent.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Unix socket paths are limited to ~108 bytes and PMIx puts its rendezvous
 * socket in this directory, so a long $TMPDIR is not used. */
int plr_tmpdir_create(char *path, size_t size)
{
    const char *base = getenv("TMPDIR");
    if (base == NULL || base[0] != '/' || strlen(base) > 48 || access(base, W_OK) != 0)
        base = "/tmp";
    if ((size_t)snprintf(path, size, "%s/plaitrun.XXXXXX", base) >= size)
        return -1;
    return mkdtemp(path) ? 0 : -1;
}

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
