/* datadir.c: the installed data directory, relative to the running binary (see datadir.h). */
#include "common/datadir.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef GPTKIT_DATADIR
#define GPTKIT_DATADIR "/usr/local/share/gptkit"
#endif

/* The directory above the running binary's: PREFIX for PREFIX/bin/gpt-x, into dir[0..cap);
 * 0, or -1 when /proc/self/exe cannot say. */
static int exe_parent(char *dir, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", dir, cap - 1);
    if (n <= 0) return -1;
    dir[n] = '\0';
    for (int up = 0; up < 2; up++) { /* PREFIX/bin/gpt-x -> PREFIX/bin -> PREFIX */
        char *slash = strrchr(dir, '/');
        if (!slash) return -1;
        *slash = '\0';
    }
    return 0;
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *gk_datadir(char *buf, size_t cap)
{
    char exe[PATH_MAX];
    if (exe_parent(exe, sizeof exe) == 0 && (size_t)snprintf(buf, cap, "%s/share/gptkit", exe) < cap
        && is_dir(buf))
        return buf;
    snprintf(buf, cap, "%s", GPTKIT_DATADIR);
    return buf;
}

const char *gk_datadir_checkout_configs(char *buf, size_t cap)
{
    char build[PATH_MAX], mark[PATH_MAX + 32];
    struct stat st;
    if (exe_parent(build, sizeof build) != 0) return NULL;
    /* BUILD's parent is a checkout when it holds this file's source beside train/configs */
    if ((size_t)snprintf(mark, sizeof mark, "%s/../common/datadir.c", build) >= sizeof mark
        || stat(mark, &st) != 0 || !S_ISREG(st.st_mode))
        return NULL;
    if ((size_t)snprintf(buf, cap, "%s/../train/configs", build) >= cap || !is_dir(buf))
        return NULL;
    char *real = realpath(buf, NULL); /* messages name it without the "BUILD/.." */
    if (real && strlen(real) < cap) strcpy(buf, real);
    free(real);
    return buf;
}
