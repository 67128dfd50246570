/* datadir.c: the installed data directory, relative to the running binary (see datadir.h). */
#include "common/datadir.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef GPTKIT_DATADIR
#define GPTKIT_DATADIR "/usr/local/share/gptkit"
#endif

const char *gk_datadir(char *buf, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char *slash = NULL;
    if (n > 0) {
        exe[n] = '\0';
        if ((slash = strrchr(exe, '/'))) /* PREFIX/bin/gpt-x -> PREFIX/bin */
            *slash = '\0';
        if (slash && (slash = strrchr(exe, '/'))) /* -> PREFIX */
            *slash = '\0';
    }
    struct stat st;
    if (slash && (size_t)snprintf(buf, cap, "%s/share/gptkit", exe) < cap && stat(buf, &st) == 0
        && S_ISDIR(st.st_mode))
        return buf;
    snprintf(buf, cap, "%s", GPTKIT_DATADIR);
    return buf;
}
