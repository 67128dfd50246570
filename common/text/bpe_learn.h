/* bpe_learn.h: learning a byte-level BPE vocabulary (gpt-tokenize --learn): the pre-tokens of the
 * text counted (gk_bpe_counter, bounded by a memory setting), then the merges, as HuggingFace
 * tokenizers' BpeTrainer makes them for a byte-level model with an initial alphabet of the 256
 * bytes: each step merges the most frequent adjacent pair of tokens in the counted pre-tokens,
 * a tie going to the pair of the lowest (left, right) ids, where the 256 bytes come first in
 * the order of GPT-2's byte alphabet (its encoder.json's first 256 ids: printable bytes, then the
 * others) and each new token after them in the order made; every occurrence is merged left to
 * right, and a merge whose bytes are already a token makes no new one (the vocabulary does not
 * grow). Pair counts are kept incrementally with the words each pair occurs in, and a max-heap
 * with lazy refresh picks the next merge.
 * Owns: the counter's table and arena (new .. free); a gk_bpe_learned's arrays (learn .. free).
 * Thread safety: one thread per counter; absorb merges one counter into another. */
#ifndef GK_BPE_LEARN_H
#define GK_BPE_LEARN_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

typedef struct gk_bpe_counter gk_bpe_counter;

/* A counter that holds at most max_bytes of table and pre-token bytes (at least 1 MB): when it
 * would hold more, the pre-tokens of the lowest counts are dropped (gk_bpe_counter_pruned says
 * how many) until it holds half. */
int gk_bpe_counter_new(gk_bpe_counter **out, size_t max_bytes, gk_err *e);
void gk_bpe_counter_free(gk_bpe_counter *c); /* NULL-safe */
/* Changes the bound (the next add prunes when the counter is past it). */
void gk_bpe_counter_set_max(gk_bpe_counter *c, size_t max_bytes);
/* count more of pre-token piece[0..n) (n > 0). 0 or GK_ENOMEM. */
int gk_bpe_counter_add(gk_bpe_counter *c, const void *piece, size_t n, uint64_t count, gk_err *e);
/* Adds every pre-token of src into dst (src unchanged). 0 or GK_ENOMEM. */
int gk_bpe_counter_absorb(gk_bpe_counter *dst, const gk_bpe_counter *src, gk_err *e);
size_t gk_bpe_counter_distinct(const gk_bpe_counter *c);
/* Calls fn(ctx, piece, n, count) for every pre-token counted, in no particular order, until fn
 * returns nonzero (returned). */
int gk_bpe_counter_each(const gk_bpe_counter *c,
                        int (*fn)(void *ctx, const unsigned char *piece, size_t n, uint64_t count),
                        void *ctx);
/* Pre-tokens dropped by the bound: distinct ones, and their occurrences. */
void gk_bpe_counter_pruned(const gk_bpe_counter *c, uint64_t *distinct, uint64_t *occurrences);

/* The merges learned: merge i joins tokens left[i] and right[i] into token made[i]. Tokens 0..255
 * are the bytes in GPT-2's alphabet order (byte_of[id]); token 256 + k is the k-th made, its
 * bytes at bytes + off[k] .. off[k + 1]. */
typedef struct gk_bpe_learned {
    size_t n_merges, n_tokens; /* tokens: 256 + the ones made */
    uint32_t *left, *right, *made;
    unsigned char byte_of[256];
    unsigned char *bytes;
    size_t *off;               /* n_tokens - 256 + 1 */
} gk_bpe_learned;

/* Called every so often while merging: merges done of total, the last one's bytes. */
typedef void (*gk_bpe_progress)(void *ctx, size_t done, size_t total, const unsigned char *tok,
                                size_t len);

/* Learns from c's counts until 256 + the tokens made reach n_tokens or no pair is left (then
 * out->n_tokens says how far it got). 0, GK_ENOMEM, or GK_EINTR when *stop was set (checked
 * between merges; stop may be NULL). */
int gk_bpe_learn(const gk_bpe_counter *c, size_t n_tokens, gk_bpe_progress fn, void *ctx,
                 volatile int *stop, gk_bpe_learned *out, gk_err *e);
void gk_bpe_learned_free(gk_bpe_learned *l); /* the arrays; NULL-safe */
/* The bytes of token id (< l->n_tokens) and their number. */
const unsigned char *gk_bpe_learned_token(const gk_bpe_learned *l, uint32_t id, size_t *len);

#endif
