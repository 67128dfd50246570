/* vocab_hf.c: a BPE vocabulary as HuggingFace tokenizers' tokenizer.json (gk_vocab_hf_json in
 * vocab.h): the byte-level model (vocab and merges as vocab.json and merges.txt have them), the
 * pre-tokenizer of the vocab's pattern, the special tokens as added tokens. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/text/vocab.h"
#include "common/text/vocab_int.h"

/* The merges text's lines "A B" (after the #version line) as [["A", "B"], ...]; NULL when out
 * of memory. */
static json_t *merge_pairs(const char *m, size_t len)
{
    json_t *pairs = json_array();
    for (const char *s = m, *end = m + len; pairs && s < end;) {
        const char *nl = memchr(s, '\n', (size_t)(end - s)), *stop = nl ? nl : end;
        size_t n = (size_t)(stop - s);
        if (n && s[n - 1] == '\r') n--;
        const char *sp = memchr(s, ' ', n);
        if (n && *s != '#' && sp) {
            json_t *pair = json_array();
            if (!pair || json_array_append_new(pair, json_stringn(s, (size_t)(sp - s))) ||
                json_array_append_new(pair, json_stringn(sp + 1, n - (size_t)(sp - s) - 1)) ||
                json_array_append_new(pairs, pair))
                json_decref(pairs), pairs = NULL;
        }
        s = nl ? nl + 1 : end;
    }
    return pairs;
}

/* Whether token id is special: <|endoftext|>, or after it and printable ASCII without spaces
 * (gpt-tokenize --special's). */
static int special(const gk_vocab *v, uint32_t id)
{
    if (v->eot < 0 || id < (uint32_t)v->eot) return 0;
    for (uint32_t k = v->off[id]; k < v->off[id + 1]; k++)
        if (v->bytes[k] < 0x21 || v->bytes[k] > 0x7E) return 0;
    return 1;
}

/* The special tokens as tokenizers' added_tokens; NULL when out of memory. */
static json_t *added_tokens(const gk_vocab *v)
{
    json_t *added = json_array();
    for (uint32_t id = v->eot < 0 ? v->n : (uint32_t)v->eot; added && id < v->n; id++) {
        if (!special(v, id)) continue;
        json_t *t = json_pack("{s:I,s:s%,s:b,s:b,s:b,s:b,s:b}", "id", (json_int_t)id, "content",
                              (const char *)v->bytes + v->off[id],
                              (size_t)(v->off[id + 1] - v->off[id]), "single_word", 0, "lstrip",
                              0, "rstrip", 0, "normalized", 0, "special", 1);
        if (!t || json_array_append_new(added, t)) json_decref(added), added = NULL;
    }
    return added;
}

/* GPT-2's: ByteLevel with its own regex; another: Split on the pattern, then ByteLevel. */
static json_t *pre_tokenizer(int pattern)
{
    int own = pattern == GK_PATTERN_GPT2;
    json_t *bl = json_pack("{s:s,s:b,s:b,s:b}", "type", "ByteLevel", "add_prefix_space", 0,
                           "trim_offsets", 1, "use_regex", own);
    if (own || !bl) return bl;
    json_t *split = json_pack("{s:s,s:{s:s},s:s,s:b}", "type", "Split", "pattern", "Regex",
                              gk_pattern_regex(pattern), "behavior", "Isolated", "invert", 0);
    return json_pack("{s:s,s:[o,o]}", "type", "Sequence", "pretokenizers", split, bl);
}

/* The model into *out: vocab (token -> id, the byte alphabet's keys) and merges. */
static int bpe_model(const gk_vocab *v, json_t **out, gk_err *e)
{
    char *vj = NULL, *m = NULL;
    size_t vl = 0, ml = 0;
    json_t *vocab = NULL, *pairs = NULL;
    int rc = gk_vocab_to_json(v, &vj, &vl, e);
    if (!rc) rc = gk_vocab_merges(v, &m, &ml, e);
    if (!rc) vocab = json_loadb(vj, vl, 0, NULL), pairs = vocab ? merge_pairs(m, ml) : NULL;
    free(vj), free(m);
    if (rc) return rc;
    *out = json_pack("{s:s,s:n,s:n,s:n,s:n,s:b,s:b,s:b,s:o,s:o}", "type", "BPE", "dropout",
                     "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk",
                     0, "byte_fallback", 0, "ignore_merges", 0, "vocab", vocab, "merges", pairs);
    return *out ? 0 : gk_errf(e, GK_ENOMEM, "tokenizer.json: out of memory");
}

int gk_vocab_hf_json(const gk_vocab *v, char **out, size_t *len, gk_err *e)
{
    *out = NULL, *len = 0;
    if (v->type != GK_VOCAB_BPE)
        return gk_errf(e, GK_EUSAGE, "tokenizer.json: a char vocabulary has no byte-level form");
    json_t *model = NULL;
    int rc = bpe_model(v, &model, e);
    if (rc) return rc;
    json_t *post = json_pack("{s:s,s:b,s:b,s:b}", "type", "ByteLevel", "add_prefix_space", 1,
                             "trim_offsets", 0, "use_regex", 1);
    json_t *dec = json_pack("{s:s,s:b,s:b,s:b}", "type", "ByteLevel", "add_prefix_space", 1,
                            "trim_offsets", 1, "use_regex", 1);
    json_t *root = json_pack("{s:s,s:n,s:n,s:o,s:n,s:o,s:o,s:o,s:o}", "version", "1.0",
                             "truncation", "padding", "added_tokens", added_tokens(v),
                             "normalizer", "pre_tokenizer", pre_tokenizer(v->pattern),
                             "post_processor", post, "decoder", dec, "model", model);
    *out = root ? json_dumps(root, JSON_PRESERVE_ORDER | JSON_COMPACT) : NULL;
    json_decref(root);
    if (!*out) return gk_errf(e, GK_ENOMEM, "tokenizer.json: out of memory");
    *len = strlen(*out);
    return 0;
}
