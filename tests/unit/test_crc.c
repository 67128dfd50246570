/* test_crc.c: gptkit's CRC-32 (common/io/safetensors_sum.c) against zlib's crc32 itself, the
 * independent reference: the checkpoint writer and verifier share gk_crc32, so a part of a large
 * tensor left out of the sum (a dropped tail) would pass every round trip. Every split into 1 to
 * 8 threads of small and odd sizes, the sizes around the 16 MB threshold where threads start and
 * around the part boundaries, 1-byte tails, and sums continued across two calls. */
#include <stdint.h>
#include <zlib.h>

#include "common/io/safetensors.h"
#include "test.h"

#define MB (1u << 20)

static uint8_t *buf;
static const size_t buf_len = 40 * MB + 64;

static uint32_t ref(uint32_t crc, size_t off, size_t n)
{
    return (uint32_t)crc32_z(crc, buf + off, n);
}

/* Every k on every size up to 80 bytes (parts of 0 bytes, 1-byte tails), at odd offsets too. */
static void test_small_splits(void)
{
    for (size_t k = 1; k <= 9; k++)
        for (size_t n = 0; n <= 80; n++) {
            size_t off = n % 3;
            uint32_t got = gk_crc32_parts(0x1234u, buf + off, n, k), want = ref(0x1234u, off, n);
            CHECKF(got == want, "k %zu, n %zu: %08x, zlib %08x", k, n, got, want);
        }
}

/* Sizes around the part boundaries of a large buffer: each part n / k bytes, the last the rest. */
static void test_large_splits(void)
{
    static const size_t sizes[] = {8 * MB - 1, 8 * MB + 1, 16 * MB + 7, 24 * MB + 5};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (size_t k = 2; k <= 8; k++) {
            size_t n = sizes[i] + k / 2; /* n % k runs over several remainders */
            uint32_t got = gk_crc32_parts(0, buf + 1, n, k), want = ref(0, 1, n);
            CHECKF(got == want, "k %zu, n %zu: %08x, zlib %08x", k, n, got, want);
        }
}

/* gk_crc32 itself, which picks the threads, just below, at and above the 16 MB threshold, and
 * continued across two calls split at odd places. */
static void test_threshold(void)
{
    static const size_t sizes[] = {16 * MB - 1, 16 * MB, 16 * MB + 1, 16 * MB + 3, 32 * MB + 1,
                                   40 * MB + 63};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        size_t n = sizes[i];
        uint32_t got = gk_crc32(0, buf, n), want = ref(0, 0, n);
        CHECKF(got == want, "n %zu: %08x, zlib %08x", n, got, want);
        got = gk_crc32(0xdeadbeefu, buf + 1, n);
        CHECKF(got == ref(0xdeadbeefu, 1, n), "n %zu from 1, continuing", n);
    }
    static const size_t cuts[] = {1, 8 * MB + 1, 16 * MB - 1, 24 * MB + 3, 40 * MB + 62};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        size_t n = 40 * MB + 63, c = cuts[i];
        uint32_t got = gk_crc32(gk_crc32(0, buf, c), buf + c, n - c);
        CHECKF(got == ref(0, 0, n), "cut at %zu", c);
    }
}

int main(void)
{
    buf = malloc(buf_len);
    if (!buf)
        return 1;
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < buf_len; i++, x = x * 6364136223846793005ull + 1442695040888963407ull)
        buf[i] = (uint8_t)(x >> 56);
    RUN(test_small_splits);
    RUN(test_large_splits);
    RUN(test_threshold);
    free(buf);
    return TEST_END();
}
