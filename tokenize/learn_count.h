/* learn_count.h: gpt-tokenize --learn's counting (learn.c): a document consumer that counts the
 * pre-tokens (of a pattern: common/text/pretok.h) of the text on a pool of threads. The reader's
 * thread batches the documents into blocks of about 4 MB (a longer document cut where
 * gk_bpe_split_point allows, so the pieces are those of the whole text); each worker sanitizes
 * its blocks' text (invalid UTF-8 replaced as encoding replaces it), cuts it into pre-tokens
 * and counts them in a counter of its own, bounded by its share of the memory setting; the end
 * adds the counters together. The counts do not depend on the number of threads (nor on where
 * the pruning of a bound drops, when none is reached).
 * Owns: the workers, their counters and the blocks (new .. free). Call from one thread. */
#ifndef TK_LEARN_COUNT_H
#define TK_LEARN_COUNT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/text/bpe_learn.h"
#include "run.h"

typedef struct tk_counting tk_counting;

typedef struct tk_count_stats {
    int64_t docs, bytes, replaced; /* replaced: invalid UTF-8 sequences -> U+FFFD */
} tk_count_stats;

/* threads >= 1 workers; pattern: GK_PATTERN_*; memory: the bound of all the counters together;
 * max_docs: 0 all. */
int tk_counting_new(tk_counting **out, int threads, int pattern, size_t memory, int64_t max_docs,
                    gk_err *e);
tk_consumer tk_counting_consumer(tk_counting *k);
/* After the reading: the last block counted, the workers joined, and every count in *all (owned
 * by k); a worker's failure returned. */
int tk_counting_finish(tk_counting *k, const gk_bpe_counter **all, tk_count_stats *st,
                       gk_err *e);
void tk_counting_free(tk_counting *k); /* NULL-safe; joins the workers */

#endif
