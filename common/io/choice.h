/* choice.h: multiple-choice items in HellaSwag's JSON Lines format (hellaswag_val.jsonl: an
 * object a line with "ctx", "endings" (2..GK_CHOICE_MAX strings) and "label", the index of the
 * right ending; other keys are ignored), read and encoded for scoring as llm.c and build-nanogpt
 * score HellaSwag (kernels/infer/multichoice.h): the tokens of ctx, then those of " " + endings[k]
 * for each k, each text encoded apart, without <|endoftext|>.
 * Owns: gk_choice_set's items and their tokens until gk_choice_free. One thread. */
#ifndef GK_IO_CHOICE_H
#define GK_IO_CHOICE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/text/vocab.h"

enum { GK_CHOICE_MAX = 16 };

typedef struct gk_choice_item {
    long line;                     /* 1-based line in its file */
    int label, n_endings, n_ctx;   /* n_ctx: tokens of ctx (its last context at most) */
    int end_len[GK_CHOICE_MAX];    /* tokens of each ending */
    uint32_t *ids;                 /* ctx's tokens, then each ending's */
} gk_choice_item;

typedef struct gk_choice_set {
    char *name;                    /* path or "stdin" */
    gk_choice_item *items;
    size_t n;
    int max_endings, max_row;      /* over the items: endings, tokens of the longest row */
} gk_choice_set;

/* Reads path ("-" = stdin), a JSON object a line (blank lines skipped; a UTF-8 byte-order mark
 * at the start skipped), encoding each text with v. Every problem (not JSON, a missing or
 * mistyped key, a label that is not an integer naming an ending, an empty ctx, a token outside
 * vocab_limit, an ending longer than context tokens) is GK_EFORMAT naming "path:line", as is
 * running out of memory (GK_ENOMEM) on an item. Of ctx only the last context tokens are kept
 * (a row keeps its last context + 1, and an ending has one token at least): a ctx longer than
 * context tokens of the longest length is encoded from gk_choice_ctx_start on, whose tokens end
 * as the whole text's (so a character a char vocabulary lacks before that is not noticed). */
int gk_choice_load(gk_choice_set *s, const char *path, const gk_vocab *v, uint32_t vocab_limit,
                   int context, gk_err *e);
void gk_choice_free(gk_choice_set *s); /* zeroes s */

/* The last p <= len - keep where text can be cut so that the tokens of text[p:] are the last
 * ones of text's: text[p-1] printable non-space ASCII and text[p] ASCII whitespace; 0 if none. */
size_t gk_choice_ctx_start(const char *text, size_t len, size_t keep);

#endif
