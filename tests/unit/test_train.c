/* test_train.c: gpt-train's modules on their own: the data-window hash (pinned: data order must
 * not change), the learning-rate schedule, and metrics.jsonl (null for non-finite values, history
 * kept on resume). */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "train/data.h"
#include "train/metrics.h"

static char dir[64];

/* The values of the hash before it moved onto kernels/rng.h's mixer: the windows every existing
 * run and checkpoint was trained on. */
static void test_hash_pinned(void)
{
    CHECK(tr_hash(1337, 1, 0, 0) == 0x86778c4eb324d8d5ULL);
    CHECK(tr_hash(1337, 3, 7, 11) == 0x6ca2f190c0cde8a7ULL);
    CHECK(tr_hash(0, 0, 0, 0) == 0x2130748aaac80268ULL);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/gk_test_train_%ld", (long)getpid());
    mkdir(dir, 0700);
    RUN(test_hash_pinned);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return TEST_END();
}
