/* util.c: the helpers of fuzz.h (input files on memfds, pipes, splitting). Linked into
 * every fuzzer and every replay binary. */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests/fuzz/fuzz.h"

const char *fz_file(int slot, const uint8_t *data, size_t size)
{
    static int fds[4] = {-1, -1, -1, -1};
    static char paths[4][32];
    if (slot < 0 || slot >= 4)
        return NULL;
    if (fds[slot] < 0) {
        fds[slot] = memfd_create("fuzz-input", 0);
        if (fds[slot] < 0)
            return NULL;
        snprintf(paths[slot], sizeof paths[slot], "/proc/self/fd/%d", fds[slot]);
    }
    if (ftruncate(fds[slot], 0) != 0)
        return NULL;
    size_t done = 0;
    while (done < size) {
        ssize_t w = pwrite(fds[slot], data + done, size - done, (off_t)done);
        if (w <= 0)
            return NULL;
        done += (size_t)w;
    }
    return paths[slot];
}

int fz_pipe(const uint8_t *data, size_t size)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    if (size > FZ_PIPE_MAX)
        size = FZ_PIPE_MAX;
    if (size > 65536)
        fcntl(p[1], F_SETPIPE_SZ, (int)size);
    size_t done = 0;
    while (done < size) {
        ssize_t w = write(p[1], data + done, size - done);
        if (w <= 0)
            break; /* the pipe is full: the reader sees what fit */
        done += (size_t)w;
    }
    close(p[1]);
    return p[0];
}

void fz_split(const uint8_t *data, size_t size, uint8_t sep, const uint8_t **a, size_t *na,
              const uint8_t **b, size_t *nb)
{
    const uint8_t *at = size ? memchr(data, sep, size) : NULL;
    *a = data;
    *na = at ? (size_t)(at - data) : size;
    *b = at ? at + 1 : NULL;
    *nb = at ? size - *na - 1 : 0;
}
