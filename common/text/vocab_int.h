/* vocab_int.h: the inside of gk_vocab, shared by the vocabulary modules and bpe.c only.
 * Owns: nothing beyond gk_vocab's fields; every table here is built at load and then read-only.
 * Thread safety: after loading, all readers here are safe from any number of threads. */
#ifndef GK_VOCAB_INT_H
#define GK_VOCAB_INT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/text/vocab.h"

#define GK_NONE 0xFFFFFFFFu
#define GK_EOT_TEXT "<|endoftext|>"

typedef struct gk_pair {
    uint32_t left, right, merged; /* left == GK_NONE: empty slot */
} gk_pair;

struct gk_vocab {
    int type;               /* GK_VOCAB_BPE or GK_VOCAB_CHAR */
    uint32_t n;             /* ids incl. the special token */
    int32_t eot;            /* special token id, -1 for none */
    unsigned char *bytes;   /* every token's bytes back to back, in id order */
    uint32_t *off;          /* n+1 offsets into bytes */
    char *merges;           /* raw merges file text (NUL-terminated) or NULL */
    size_t merges_len;
    uint32_t fingerprint;
    /* BPE */
    int pattern;            /* pre-tokenizer, GK_PATTERN_* (pretok.h); GPT-2's unless the merges
                             * text's first line names another */
    uint32_t byte_id[256];  /* id of each single-byte token */
    uint32_t *tok_tab;      /* bytes -> id, open addressing, GK_NONE empty; excludes eot */
    uint32_t tok_mask;
    gk_pair *pair_tab;      /* (left id, right id) -> id of their concatenation */
    uint32_t pair_mask;
    uint32_t *byte_pair;    /* [b1 << 8 | b2]: gk_vocab_pair(byte_id[b1], byte_id[b2]) */
    /* char */
    uint32_t *cps;          /* code point of each id, ascending */
    int32_t ascii_id[128];  /* id of each ASCII char, -1 if absent */
};

/* Collects (id, bytes) pairs given in any order, then lays them out in id order. */
typedef struct gk_vbuild {
    unsigned char *arena;
    size_t alen, acap;
    size_t *soff;           /* per id: offset in arena */
    uint32_t *slen;         /* per id: length, GK_NONE while unset */
    uint32_t n;
} gk_vbuild;

int gk_vbuild_init(gk_vbuild *b, uint32_t n);
/* Returns 0, GK_ENOMEM, GK_EFORMAT (id >= n: out of range, or id already set). */
int gk_vbuild_put(gk_vbuild *b, uint32_t id, const void *bytes, size_t len);
/* Moves the tokens into v (bytes, off, n); every id must be set (else GK_EFORMAT, *gap = id). */
int gk_vbuild_finish(gk_vbuild *b, gk_vocab *v, uint32_t *gap);
void gk_vbuild_free(gk_vbuild *b);

gk_vocab *gk_vocab_alloc(int type);
/* Builds the BPE lookup tables and fingerprint once bytes/off/n/eot are set; checks for
 * duplicate tokens and missing single bytes (messages name path). */
int gk_vocab_finish_bpe(gk_vocab *v, const char *path, gk_err *e);
/* Sets a finished BPE vocab's pattern (and so its fingerprint). */
void gk_vocab_set_pattern(gk_vocab *v, int pattern);
/* Finishes a char vocab from v->cps/v->n (sorted, distinct): tokens, tables, fingerprint. */
int gk_vocab_finish_chars(gk_vocab *v, const char *path, gk_err *e);

/* The largest vocabulary file read (common/io/readall.h's bound): a tokenizer.json of a large
 * vocabulary is tens of megabytes. */
#define GK_VOCAB_FILE_MAX ((size_t)1 << 30)

uint64_t gk_hash_bytes(const void *p, size_t n);

/* Grows the id array *ids (capacity *cap) to hold at least need ids; 0 or GK_ENOMEM. */
int gk_ids_reserve(uint32_t **ids, size_t *cap, size_t need);

/* Id of the (non-special) token with these bytes, or GK_NONE. */
uint32_t gk_vocab_lookup(const gk_vocab *v, const void *bytes, size_t len);
/* The same, given h = gk_hash_bytes(bytes, len). */
uint32_t gk_vocab_lookup_h(const gk_vocab *v, const void *bytes, size_t len, uint64_t h);

static inline uint32_t gk_pair_hash(uint32_t l, uint32_t r)
{
    uint64_t k = ((uint64_t)l << 32 | r) * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(k >> 32);
}

/* Id of the token whose bytes are those of left then right, or GK_NONE. */
static inline uint32_t gk_vocab_pair(const gk_vocab *v, uint32_t l, uint32_t r)
{
    uint32_t i = gk_pair_hash(l, r) & v->pair_mask;
    for (;;) {
        const gk_pair *p = &v->pair_tab[i];
        if (p->left == l && p->right == r) return p->merged;
        if (p->left == GK_NONE) return GK_NONE;
        i = (i + 1) & v->pair_mask;
    }
}

#endif
