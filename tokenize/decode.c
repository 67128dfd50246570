/* decode.c: shards to text (see decode.h). */
#include "decode.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/io/shard.h"

#define DECODE_TOKENS 65536

static int check_vocab(const gk_shard_reader *r, const gk_vocab *v, gk_err *e)
{
    if (r->fingerprint && r->fingerprint != gk_vocab_fingerprint(v))
        return gk_errf(e, GK_EFORMAT,
                       "%s: made with another vocabulary (fingerprint %08x, this one is %08x); "
                       "give the right one with -V", r->name, r->fingerprint, gk_vocab_fingerprint(v));
    if (r->vocab_size && r->vocab_size != gk_vocab_size(v))
        return gk_errf(e, GK_EFORMAT, "%s: made with a vocabulary of %u tokens, this one has %u",
                       r->name, r->vocab_size, gk_vocab_size(v));
    return 0;
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

int tk_decode(const gk_vocab *v, char **inputs, int ninputs, int *raw_inputs, gk_err *e)
{
    uint32_t *ids = malloc(DECODE_TOKENS * sizeof *ids);
    if (!ids)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    int rc = 0, first = 1;
    *raw_inputs = 0;
    for (int i = 0; rc == 0 && i < ninputs; i++) {
        gk_shard_reader r;
        if ((rc = gk_shard_open(&r, inputs[i], e)))
            break;
        *raw_inputs += r.raw;
        rc = check_vocab(&r, v, e);
        size_t got = 1;
        while (rc == 0 && got > 0)
            if ((rc = gk_shard_read(&r, ids, DECODE_TOKENS, &got, e)) == 0)
                rc = write_tokens(v, &r, ids, got, &first, e);
        gk_shard_close(&r);
    }
    if (rc == 0 && fflush(stdout) != 0)
        rc = gk_errno(e, "stdout");
    free(ids);
    return rc;
}
