/* fuzz.h: what the libFuzzer targets (tests/fuzz/fuzz_NAME.c) share. Each target defines
 * LLVMFuzzerTestOneInput and nothing else global; libFuzzer drives it under `make fuzz`
 * (clang, ASan + UBSan), tests/fuzz/replay.c drives it under `make test` on every file of
 * tests/fuzz/corpus/NAME and tests/fuzz/regressions/NAME. A target reports a broken property
 * with FZ_ASSERT (abort: libFuzzer saves the input, replay fails). */
#ifndef GPTKIT_FUZZ_H
#define GPTKIT_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A path whose file holds exactly data[0..size) (one memfd per slot, rewritten each call:
 * slot 0..3 let a target build inputs that take several files). NULL if it cannot. */
const char *fz_file(int slot, const uint8_t *data, size_t size);

/* A pipe's read end with data[0..size) written and the write end closed; at most
 * FZ_PIPE_MAX bytes (the rest is dropped). -1 if it cannot. The caller closes it. */
#define FZ_PIPE_MAX (1 << 20)
int fz_pipe(const uint8_t *data, size_t size);

/* Splits data at the first occurrence of the byte sep: *a, *na before; *b, *nb after
 * (*b = NULL, *nb = 0 when there is none). Targets taking two inputs use it. */
void fz_split(const uint8_t *data, size_t size, uint8_t sep, const uint8_t **a, size_t *na,
              const uint8_t **b, size_t *nb);

#define FZ_ASSERT(cond, ...)                                                                 \
    do {                                                                                     \
        if (!(cond)) {                                                                       \
            fprintf(stderr, "%s:%d: property failed: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                    \
            fputc('\n', stderr);                                                             \
            abort();                                                                         \
        }                                                                                    \
    } while (0)

#endif
