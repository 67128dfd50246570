/* collect.h: the collector that char-level mode without -V needs, since its vocabulary (the
 * sorted code points of the whole text) exists only once all text is read. The documents go to
 * a temporary file (spill.h) while their code points are marked, then are replayed from it into
 * the encoder: memory stays bounded whatever the input.
 * Owns: that file, the code point set and its work buffers (init .. free). Not thread-safe. */
#ifndef TK_COLLECT_H
#define TK_COLLECT_H

#include <stddef.h>

#include "common/err.h"
#include "common/text/vocab.h"
#include "run.h"
#include "spill.h"

typedef struct tk_collector {
    tk_spill text;         /* records: a uint32 length then that many bytes; ~0u: a document */
    unsigned char *seen;   /* one bit per code point */
    char pend[4];          /* an incomplete UTF-8 sequence at the end of the text so far */
    size_t npend;
    char *work, *clean;    /* pend + new bytes; the same with U+FFFD for invalid sequences */
    size_t work_cap, clean_cap;
    size_t max_record;     /* the longest text record, for replay's buffer */
} tk_collector;

/* Holds the text in a temporary file in tmpdir (spill.h). */
int tk_collector_init(tk_collector *c, const char *tmpdir, gk_err *e);
tk_consumer tk_collector_consumer(tk_collector *c);
/* Replays the held documents into another consumer. */
int tk_collector_replay(tk_collector *c, const tk_consumer *to, gk_err *e);
/* Char-level vocabulary: the sorted distinct code points of the held text (invalid UTF-8 counts
 * as U+FFFD, as if the whole text were decoded at once). */
int tk_collector_char_vocab(tk_collector *c, gk_vocab **out, gk_err *e);
void tk_collector_free(tk_collector *c);

#endif
