/* fuzz_shard.c: the shard header parser and the three readers (stream from a file, stream from
 * a pipe, mapped windows) on arbitrary bytes. Properties: whatever a reader accepts, every token
 * it returns is inside the header's vocabulary, and a streamed file yields the header's count. */
#include <unistd.h>

#include "common/io/shard.h"
#include "tests/fuzz/fuzz.h"

static void stream(const char *path, int seekable)
{
    gk_err e = {0};
    gk_shard_reader r;
    if (gk_shard_open(&r, path, &e))
        return;
    uint32_t buf[257];
    size_t got = 1;
    int64_t total = 0;
    int rc = 0;
    while (got > 0 && (rc = gk_shard_read(&r, buf, 257, &got, &e)) == 0) {
        for (size_t i = 0; i < got; i++)
            FZ_ASSERT(!r.vocab_size || buf[i] < r.vocab_size, "token %u, vocab %u", buf[i],
                      r.vocab_size);
        total += (int64_t)got;
    }
    if (rc == 0 && seekable && !r.raw && r.count >= 0)
        FZ_ASSERT(total == r.count, "read %lld tokens, header says %lld", (long long)total,
                  (long long)r.count);
    gk_shard_close(&r);
}

static void mapped(const char *path)
{
    gk_err e = {0};
    gk_shard_map m;
    if (gk_shard_map_open(&m, path, &e))
        return;
    uint32_t buf[64];
    int64_t starts[] = {0, m.count / 2, m.count - 1, m.count - 64, m.count};
    for (size_t i = 0; i < sizeof starts / sizeof *starts; i++) {
        int64_t start = starts[i] < 0 ? 0 : starts[i];
        size_t n = m.count - start < 64 ? (size_t)(m.count - start) : 64;
        e = (gk_err){0};
        if (gk_shard_map_get(&m, start, n, m.vocab_size, buf, &e) == 0)
            for (size_t k = 0; k < n; k++)
                FZ_ASSERT(!m.vocab_size || buf[k] < m.vocab_size, "token %u", buf[k]);
    }
    gk_shard_map_close(&m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fz_file(0, data, size);
    if (!path)
        return 0;
    stream(path, 1);
    mapped(path);
    int fd = fz_pipe(data, size);
    if (fd >= 0) {
        char pipe_path[32];
        snprintf(pipe_path, sizeof pipe_path, "/proc/self/fd/%d", fd);
        stream(pipe_path, 0);
        close(fd);
    }
    return 0;
}
