/* mem.c: the host memory this process may still take (see mem.h). */
#include "common/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The number in a file's first line ("max" and unreadable files: GK_MEM_UNKNOWN). */
static size_t read_num(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return GK_MEM_UNKNOWN;
    char line[64] = "";
    char *ok = fgets(line, sizeof line, f);
    fclose(f);
    char *end;
    unsigned long long v = ok ? strtoull(line, &end, 10) : 0;
    if (!ok || end == line)
        return GK_MEM_UNKNOWN;
    /* cgroup v1 writes "no limit" as the largest page multiple below 2^63 */
    return v >= (1ULL << 62) ? GK_MEM_UNKNOWN : (size_t)v;
}

/* "MemAvailable" or "MemTotal" of a meminfo file, in bytes. */
static size_t meminfo(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return GK_MEM_UNKNOWN;
    char line[256];
    size_t n = strlen(key), v = GK_MEM_UNKNOWN;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            v = (size_t)strtoull(line + n + 1, NULL, 10) * 1024;
    fclose(f);
    return v;
}

/* This process's cgroup path in hierarchy `want` ("" for v2's "0::", "memory" for v1) from
 * proc/self/cgroup into out; 0 when absent. */
static int cgroup_path(const char *proc, const char *want, char *out, size_t cap)
{
    char path[4096], line[4096];
    snprintf(path, sizeof path, "%s/self/cgroup", proc);
    FILE *f = fopen(path, "r");
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0'; /* "ID:CONTROLLERS:PATH": v2's CONTROLLERS is empty */
        const char *ctl = c1 + 1;
        if (*want ? strstr(ctl, want) != NULL : *ctl == '\0') {
            snprintf(out, cap, "%s", c2 + 1);
            found = 1;
        }
    }
    if (f)
        fclose(f);
    return found;
}

/* The tightest limit - usage over dir and its ancestors down to root (files lim and use);
 * *seen: some limit file was readable. */
static size_t cgroup_room(const char *root, const char *rel, const char *lim, const char *use,
                          int *seen)
{
    char dir[4096], path[4200];
    size_t room = GK_MEM_UNKNOWN, rootlen = strlen(root);
    snprintf(dir, sizeof dir, "%s%s", root, rel);
    snprintf(path, sizeof path, "%s/%s", dir, use);
    if (access(path, R_OK) != 0) /* our path is not in this mount (another namespace's view) */
        snprintf(dir, sizeof dir, "%s", root);
    for (;;) {
        size_t len = strlen(dir);
        while (len > rootlen && dir[len - 1] == '/')
            dir[--len] = '\0';
        snprintf(path, sizeof path, "%s/%s", dir, lim);
        if (access(path, R_OK) == 0)
            *seen = 1;
        size_t l = read_num(path);
        snprintf(path, sizeof path, "%s/%s", dir, use);
        size_t u = read_num(path);
        if (l != GK_MEM_UNKNOWN) {
            size_t r = u != GK_MEM_UNKNOWN && u < l ? l - u : u == GK_MEM_UNKNOWN ? l : 0;
            if (r < room)
                room = r;
        }
        char *slash = strrchr(dir, '/');
        if (len <= rootlen || !slash || (size_t)(slash - dir) < rootlen)
            break;
        *slash = '\0';
    }
    return room;
}

static size_t cgroup_avail(const char *proc, const char *cgroup)
{
    char rel[4096] = "/", root[4096];
    int seen = 0;
    if (!cgroup_path(proc, "", rel, sizeof rel))
        snprintf(rel, sizeof rel, "/");
    size_t room = cgroup_room(cgroup, rel, "memory.max", "memory.current", &seen);
    if (seen)
        return room;
    if (!cgroup_path(proc, "memory", rel, sizeof rel))
        snprintf(rel, sizeof rel, "/");
    snprintf(root, sizeof root, "%s/memory", cgroup);
    return cgroup_room(root, rel, "memory.limit_in_bytes", "memory.usage_in_bytes", &seen);
}

/* RLIMIT_AS minus the address space in use (proc/self/statm's first field, in pages). */
static size_t rlimit_room(const char *proc, size_t rlimit_as)
{
    if (rlimit_as == GK_MEM_UNKNOWN)
        return GK_MEM_UNKNOWN;
    char path[4096];
    snprintf(path, sizeof path, "%s/self/statm", proc);
    size_t pages = read_num(path);
    size_t used = pages == GK_MEM_UNKNOWN ? 0 : pages * (size_t)sysconf(_SC_PAGESIZE);
    return used < rlimit_as ? rlimit_as - used : 0;
}

void gk_host_mem_read_at(gk_host_mem *m, const char *proc, const char *cgroup, size_t rlimit_as)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/meminfo", proc);
    m->meminfo = meminfo(path, "MemAvailable");
    m->total = meminfo(path, "MemTotal");
    m->cgroup = cgroup_avail(proc, cgroup);
    m->rlimit = rlimit_room(proc, rlimit_as);
    m->avail = m->meminfo;
    m->bound = m->meminfo != GK_MEM_UNKNOWN ? "MemAvailable" : "unknown";
    if (m->cgroup < m->avail) {
        m->avail = m->cgroup;
        m->bound = "cgroup memory limit";
    }
    if (m->rlimit < m->avail) {
        m->avail = m->rlimit;
        m->bound = "ulimit -v";
    }
}

void gk_host_mem_read(gk_host_mem *m)
{
    struct rlimit rl;
    size_t as = GK_MEM_UNKNOWN;
    if (getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        as = (size_t)rl.rlim_cur;
    gk_host_mem_read_at(m, "/proc", "/sys/fs/cgroup", as);
}

const char *gk_mem_text(size_t bytes, char *buf, size_t n)
{
    static const char *unit[] = {"kB", "MB", "GB", "TB", "PB", "EB"};
    if (bytes < 1000) {
        snprintf(buf, n, "%zu bytes", bytes);
        return buf;
    }
    double v = (double)bytes / 1000;
    int u = 0;
    while (v >= 999.95 && u < 5) {
        v /= 1000;
        u++;
    }
    snprintf(buf, n, "%.1f %s", v, unit[u]);
    return buf;
}

int gk_mem_check_mode(const char *v)
{
    if (v && strcmp(v, "warn") == 0)
        return 1;
    return v && strcmp(v, "off") == 0 ? 2 : 0;
}
