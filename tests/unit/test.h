/* test.h: the unit-test harness (header-only on purpose: it is the test binaries' main).
 * Owns: pass/fail/skip counters for one test binary. Each test_*.c defines test functions and
 * a main() that calls RUN(fn) for each, then returns TEST_END(); GPT_TEST_CASE=PATTERN runs only
 * the cases whose names hold PATTERN. Not thread-safe: call from main. */
#ifndef GK_TEST_H
#define GK_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_passed, t_failed, t_skipped, t_cur_failed, t_cur_skipped;
static const char *t_cur_name;

#define CHECK(cond)                                                                     \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "FAIL %s (%s:%d): %s\n", t_cur_name, __FILE__, __LINE__, #cond); \
            t_cur_failed = 1;                                                           \
        }                                                                               \
    } while (0)

#define CHECKF(cond, ...)                                                               \
    do {                                                                                \
        if (!(cond)) {                                                                  \
            fprintf(stderr, "FAIL %s (%s:%d): %s: ", t_cur_name, __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                               \
            fputc('\n', stderr);                                                        \
            t_cur_failed = 1;                                                           \
        }                                                                               \
    } while (0)

#define CHECK_OK(expr, err)                                                              \
    do {                                                                                 \
        int t_rc_ = (expr);                                                              \
        CHECKF(t_rc_ == 0, "returned %d: %s", t_rc_, t_rc_ ? (err)->msg : "");           \
    } while (0)

/* Marks the current test as skipped (e.g. shared test data absent) and leaves it. */
#define SKIP(why)                                                                        \
    do {                                                                                 \
        fprintf(stderr, "SKIP %s: %s\n", t_cur_name, why);                               \
        t_cur_skipped = 1;                                                               \
        return;                                                                          \
    } while (0)

/* Whether case name runs: all of them, or with GPT_TEST_CASE=PATTERN set those whose names hold
 * PATTERN (the others are not counted). */
static inline int t_selected(const char *name)
{
    const char *only = getenv("GPT_TEST_CASE");
    return !only || !*only || strstr(name, only) != NULL;
}

#define RUN(fn)                                                                          \
    do {                                                                                 \
        if (!t_selected(#fn)) break;                                                     \
        t_cur_name = #fn;                                                                \
        t_cur_failed = t_cur_skipped = 0;                                                \
        fn();                                                                            \
        if (t_cur_failed) t_failed++;                                                    \
        else if (t_cur_skipped) t_skipped++;                                             \
        else t_passed++;                                                                 \
    } while (0)

/* Prints the counts in the line tests/run.sh reads and returns main's exit status. */
#define TEST_END()                                                                       \
    (printf("%d passed, %d failed, %d skipped\n", t_passed, t_failed, t_skipped), t_failed != 0)

/* Directory of the shared test data ($GPT_TEST_DATA, default ../shared/data). */
static inline const char *test_data_dir(void)
{
    const char *d = getenv("GPT_TEST_DATA");
    return d && *d ? d : "../shared/data";
}

#endif
