/* replay.c: the main of tests/fuzz's replay binaries (BUILD/tests/test_fuzz_NAME, run by
 * `make test` and, under the sanitizers, by `make check`): feeds every file of
 * tests/fuzz/corpus/NAME and tests/fuzz/regressions/NAME (or the files named on the command
 * line) to the target once. A crash or a failed property ends it like any failing test; a
 * target without a corpus fails too. Run from the top of the tree (tests/run.sh does). */
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/fuzz/fuzz.h"

static int run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: cannot open\n", path);
        return -1;
    }
    size_t cap = 1 << 16, n = 0, got;
    uint8_t *buf = malloc(cap);
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            uint8_t *grown = realloc(buf, cap *= 2);
            if (!grown)
                free(buf);
            buf = grown;
        }
    }
    fclose(f);
    if (!buf)
        return -1;
    /* libFuzzer hands the target a buffer of exactly size bytes: so does the replay, so that
     * ASan sees a read past the end here too. */
    uint8_t *exact = malloc(n ? n : 1);
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int run_dir(const char *dir, int *count)
{
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0)
        return 0; /* no regressions yet */
    int rc = 0;
    for (int i = 0; i < n; i++) {
        char path[4096];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
        if (names[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (run_file(path) == 0)
                ++*count;
            else
                rc = -1;
        }
        free(names[i]);
    }
    free(names);
    return rc;
}

int main(int argc, char **argv)
{
    const char *base = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    const char *name = strncmp(base, "test_fuzz_", 10) == 0 ? base + 10 : base;
    int count = 0, rc = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            rc |= run_file(argv[i]) ? 1 : (count++, 0);
    } else {
        char corpus[512], regressions[512];
        snprintf(corpus, sizeof corpus, "tests/fuzz/corpus/%s", name);
        snprintf(regressions, sizeof regressions, "tests/fuzz/regressions/%s", name);
        rc |= run_dir(corpus, &count) ? 1 : 0;
        if (count == 0) {
            fprintf(stderr, "%s: no seed inputs\n", corpus);
            rc = 1;
        }
        rc |= run_dir(regressions, &count) ? 1 : 0;
    }
    fprintf(stderr, "%s: %d inputs replayed%s\n", name, count, rc ? ", some unreadable" : "");
    printf("%d passed, %d failed, 0 skipped\n", rc ? 0 : 1, rc ? 1 : 0);
    return rc;
}
