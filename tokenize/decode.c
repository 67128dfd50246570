/* decode.c: shards to text (see decode.h). */
#include "decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/io/shard.h"
#include "common/le.h"
#include "common/io/shard_s3.h"
#include "common/text/vocab.h"

#define DECODE_TOKENS 65536
#define GPT2_VOCAB_SIZE 50257

/* The header's vocabulary against v; a raw input's first tokens against its size. */
static int check_vocab(gk_shard_reader *r, const gk_vocab *v, gk_err *e)
{
    if (r->fingerprint && r->fingerprint != gk_vocab_fingerprint(v))
        return gk_errf(e, GK_EFORMAT,
                       "%s: made with another vocabulary (fingerprint %08x, this one is %08x); "
                       "give the right one with -V",
                       r->name, r->fingerprint, gk_vocab_fingerprint(v));
    if (r->vocab_size && r->vocab_size != gk_vocab_size(v))
        return gk_errf(e, GK_EFORMAT, "%s: made with a vocabulary of %u tokens, this one has %u",
                       r->name, r->vocab_size, gk_vocab_size(v));
    return gk_shard_check_raw(r, gk_vocab_size(v), e);
}

/* The vocabulary for the first input. Without -V, a shard whose header names another size than
 * GPT-2's needs its own vocabulary: say so rather than that no GPT-2 vocabulary was found. */
static int vocab_for_shard(const char *vocab_opt, gk_shard_reader *first, gk_vocab **v, gk_err *e)
{
    char path[4096];
    int rc = gk_vocab_find(path, sizeof path, vocab_opt, e);
    if (rc == 0)
        rc = gk_vocab_load(v, path, e);
    if (rc == 0 && (rc = check_vocab(first, *v, e))) {
        gk_vocab_free(*v);
        *v = NULL;
    }
    if (rc && !vocab_opt && !first->raw && first->vocab_size &&
        first->vocab_size != GPT2_VOCAB_SIZE)
        rc = gk_errf(e, GK_ENOTFOUND, "%s: made with a %u-token vocabulary, not GPT-2's: give that "
                     "vocabulary with -V (for a char-level shard, the file from --vocab-out, e.g. "
                     "-V vocab.json)", first->name, first->vocab_size);
    return rc;
}

/* An object in a bucket as a reader without a stream (fp NULL): its header checked by a ranged
 * GET; decode_s3 reads its tokens. */
static int open_s3(gk_shard_reader *r, gk_s3 *s3, const char *url, gk_err *e)
{
    char bucket[256], key[1100];
    gk_s3_stat st;
    gk_shard_map m = {0};
    int64_t off;
    memset(r, 0, sizeof *r);
    int rc = s3 ? gk_s3_parse_url(url, bucket, sizeof bucket, key, sizeof key, e)
                : gk_errf(e, GK_EUSAGE, "%s: buckets are not read here", url);
    if (!rc && !(m.name = strdup(url)))
        rc = gk_errf(e, GK_ENOMEM, "out of memory");
    if (!rc)
        rc = gk_s3_head(s3, bucket, key, &st, e);
    if (!rc)
        rc = gk_shard_s3_header(s3, bucket, key, st.size, &m, &off, e);
    r->name = m.name;
    r->raw = m.raw;
    r->version = m.width == 4 ? 2 : 1;
    r->count = m.raw ? (int64_t)(m.size / 2) : m.count;
    r->vocab_size = m.vocab_size;
    r->fingerprint = m.fingerprint;
    return rc;
}

static int open_any(gk_shard_reader *r, gk_s3 *s3, const char *path, gk_err *e)
{
    return gk_s3_is_url(path) ? open_s3(r, s3, path, e) : gk_shard_open(r, path, e);
}

static int open_checked(gk_shard_reader *r, gk_s3 *s3, const char *path, const gk_vocab *v,
                        gk_err *e)
{
    int rc = open_any(r, s3, path, e);
    if (rc == 0 && (rc = check_vocab(r, v, e)))
        gk_shard_close(r);
    return rc;
}

static int write_tokens(const gk_vocab *v, const gk_shard_reader *r, const uint32_t *ids, size_t n,
                        int *first, gk_err *e)
{
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const unsigned char *bytes = gk_vocab_token(v, ids[i], &len);
        if (!bytes)
            return gk_errf(e, GK_EFORMAT, "%s: token %u is outside the vocabulary (%u tokens)",
                           r->name, ids[i], gk_vocab_size(v));
        int skip = *first && (int32_t)ids[i] == gk_vocab_eot(v);
        *first = 0;
        if (!skip && fwrite(bytes, 1, len, stdout) != len)
            return gk_errno(e, "stdout");
    }
    return 0;
}

/* An object's tokens, DECODE_TOKENS at a time by ranged GETs, each checked against v. */
static int decode_s3(gk_shard_reader *r, gk_s3 *s3, const gk_vocab *v, uint32_t *ids, int *first,
                     gk_err *e)
{
    char bucket[256], key[1100];
    int width = r->raw || r->version == 1 ? 2 : 4;
    int64_t base = r->raw ? 0 : GK_SHARD_HEADER_BYTES;
    int rc = gk_s3_parse_url(r->name, bucket, sizeof bucket, key, sizeof key, e);
    for (int64_t at = 0; !rc && at < r->count;) {
        size_t n = r->count - at < DECODE_TOKENS ? (size_t)(r->count - at) : DECODE_TOKENS;
        unsigned char *b = (unsigned char *)ids; /* decoded in place, forwards */
        if (width == 2)
            b += n * 2;
        rc = gk_shard_s3_range(s3, bucket, key, base + at * width, n * (size_t)width, b, e);
        size_t ok = rc ? n : gk_shard_decode(b, n, width, gk_vocab_size(v), ids);
        if (ok < n)
            rc = gk_errf(e, GK_EFORMAT,
                         "%s: token %u at position %lld is outside the vocabulary (%u tokens)",
                         r->name, width == 2 ? gk_le16(b + 2 * ok) : gk_le32(b + 4 * ok),
                         (long long)(at + (int64_t)ok), gk_vocab_size(v));
        if (!rc)
            rc = write_tokens(v, r, ids, n, first, e);
        at += (int64_t)n;
    }
    return rc;
}

static int decode_one(gk_shard_reader *r, gk_s3 *s3, const gk_vocab *v, uint32_t *ids, int *first,
                      gk_err *e)
{
    if (!r->fp)
        return decode_s3(r, s3, v, ids, first, e);
    int rc = 0;
    size_t got = 1;
    while (rc == 0 && got > 0)
        if ((rc = gk_shard_read(r, ids, DECODE_TOKENS, &got, e)) == 0)
            rc = write_tokens(v, r, ids, got, first, e);
    return rc;
}

/* Pass 1 checks every input, keeping open the first and the one on stdin (it cannot be read
 * twice); pass 2 decodes, reopening the others. */
int tk_decode(const char *vocab_opt, gk_s3 *s3, char **inputs, int ninputs, int *raw_inputs,
              gk_err *e)
{
    gk_shard_reader *held = calloc((size_t)ninputs, sizeof *held);
    uint32_t *ids = malloc(DECODE_TOKENS * sizeof *ids);
    gk_vocab *v = NULL;
    int rc =
        held && ids ? open_any(&held[0], s3, inputs[0], e) : gk_errf(e, GK_ENOMEM, "out of memory");
    if (rc == 0)
        rc = vocab_for_shard(vocab_opt, &held[0], &v, e);
    int stdin_seen = strcmp(inputs[0], "-") == 0;
    for (int i = 1; rc == 0 && i < ninputs; i++) {
        int is_stdin = strcmp(inputs[i], "-") == 0;
        if (is_stdin && stdin_seen)
            continue; /* read to its end already: an empty input */
        stdin_seen |= is_stdin;
        if ((rc = open_checked(&held[i], s3, inputs[i], v, e)) == 0 && !is_stdin)
            gk_shard_close(&held[i]);
    }
    int first = 1;
    *raw_inputs = 0;
    for (int i = 0; rc == 0 && i < ninputs; i++) {
        if (!held[i].name && (rc = open_checked(&held[i], s3, inputs[i], v, e)))
            break;
        *raw_inputs += held[i].raw;
        rc = decode_one(&held[i], s3, v, ids, &first, e);
        gk_shard_close(&held[i]);
    }
    for (int i = 0; held && i < ninputs; i++)
        gk_shard_close(&held[i]);
    gk_vocab_free(v);
    free(held);
    free(ids);
    return rc;
}
