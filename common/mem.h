/* mem.h: how much memory this process may still take on the host, for the up-front checks of
 * the tools (a model that cannot fit is refused before any long work, not by an allocation
 * failure halfway): MemAvailable, capped by the cgroup's limit and by RLIMIT_AS.
 * Owns nothing: every call reads /proc and /sys afresh. Thread-safe. */
#ifndef GK_MEM_H
#define GK_MEM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GK_MEM_UNKNOWN ((size_t)-1) /* a limit that is not set or cannot be read */

typedef struct gk_host_mem {
    size_t avail;      /* the least of the three below (GK_MEM_UNKNOWN when none is known) */
    size_t meminfo;    /* MemAvailable of /proc/meminfo */
    size_t cgroup;     /* the tightest limit - usage of this process's cgroup and its ancestors
                        * (v2 memory.max - memory.current; v1 memory.limit_in_bytes -
                        * memory.usage_in_bytes) */
    size_t rlimit;     /* RLIMIT_AS minus the address space in use (/proc/self/statm) */
    size_t total;      /* MemTotal of /proc/meminfo */
    const char *bound; /* which one avail is: "MemAvailable", "cgroup memory limit",
                        * "ulimit -v" (RLIMIT_AS), or "unknown" */
} gk_host_mem;

/* Reads this machine's values. */
void gk_host_mem_read(gk_host_mem *m);
/* The same from other roots, for tests: proc holds meminfo, self/cgroup and self/statm (as
 * /proc), cgroup is the cgroup mount (as /sys/fs/cgroup: v2 files at its root and below, v1 under
 * memory/); rlimit_as is RLIMIT_AS's soft value (GK_MEM_UNKNOWN: unlimited). */
void gk_host_mem_read_at(gk_host_mem *m, const char *proc, const char *cgroup, size_t rlimit_as);

/* The mode of the tools' memory checks, whose estimates may be off, from value (the tools'
 * $GPT_MEM_CHECK, common/env.h): 0 (NULL or another value): a model that does not fit is an
 * error; 1 ("warn"): a warning, and the run goes on; 2 ("off"): no check. */
int gk_mem_check_mode(const char *value);

/* bytes for a message, in decimal units with one decimal: "31.2 GB", "512.0 MB", "800 bytes". */
const char *gk_mem_text(size_t bytes, char *buf, size_t n);

#ifdef __cplusplus
}
#endif

#endif
