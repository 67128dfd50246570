/* encode_text.c: text -> token ids for a model (see encode_text.h). */
#include "common/text/encode_text.h"

#include <stdlib.h>

#include "common/grow.h"
#include "common/text/bpe.h"
#include "common/text/utf8.h"

/* Appends id to the growable array. */
static int push(uint32_t id, uint32_t **ids, size_t *n, size_t *cap, gk_err *e)
{
    if (gk_grow(ids, cap, *n + 1, sizeof **ids, 256)) return gk_errf(e, GK_ENOMEM, "out of memory");
    (*ids)[(*n)++] = id;
    return 0;
}

struct gk_text_encoder {
    const gk_vocab *v;
    gk_bpe *bpe;       /* BPE vocabularies */
    char *clean;       /* the sanitized text */
    size_t clean_cap;
};

int gk_text_encoder_create(gk_text_encoder **out, const gk_vocab *v, gk_err *e)
{
    gk_text_encoder *t = calloc(1, sizeof *t);
    if (!(*out = t)) return gk_errf(e, GK_ENOMEM, "out of memory");
    t->v = v;
    int rc = gk_vocab_type(v) == GK_VOCAB_BPE ? gk_bpe_create(&t->bpe, v, e) : 0;
    if (rc) {
        gk_text_encoder_free(t);
        *out = NULL;
    }
    return rc;
}

void gk_text_encoder_free(gk_text_encoder *t)
{
    if (!t) return;
    gk_bpe_free(t->bpe);
    free(t->clean);
    free(t);
}

int gk_text_encoder_run(gk_text_encoder *t, const char *text, size_t len, int flags,
                        uint32_t **ids, size_t *n, size_t *cap, size_t *replaced, gk_err *e)
{
    size_t clean_len = 0;
    size_t bad = gk_utf8_sanitize(text, len, &t->clean, &t->clean_cap, &clean_len);
    if (replaced) *replaced = bad == (size_t)-1 ? 0 : bad;
    if (bad == (size_t)-1) return gk_errf(e, GK_ENOMEM, "out of memory");
    int rc = 0;
    int32_t eot = gk_vocab_eot(t->v);
    if ((flags & GK_ENCODE_EOT_FIRST) && eot >= 0) rc = push((uint32_t)eot, ids, n, cap, e);
    if (rc == 0 && t->bpe)
        rc = gk_bpe_encode(t->bpe, t->clean, clean_len, !!(flags & GK_ENCODE_SPECIAL), ids, n, cap,
                           e);
    else if (rc == 0)
        rc = gk_char_encode(t->v, t->clean, clean_len, ids, n, cap, e);
    return rc;
}

int gk_text_encode(const gk_vocab *v, const char *text, size_t len, int flags, uint32_t **ids,
                   size_t *n, size_t *cap, size_t *replaced, gk_err *e)
{
    gk_text_encoder *t = NULL;
    int rc = gk_text_encoder_create(&t, v, e);
    if (!rc) rc = gk_text_encoder_run(t, text, len, flags, ids, n, cap, replaced, e);
    gk_text_encoder_free(t);
    return rc;
}

int gk_text_start_token(const gk_vocab *v, uint32_t *id, gk_err *e)
{
    int32_t eot = gk_vocab_eot(v);
    if (eot >= 0) {
        *id = (uint32_t)eot;
        return 0;
    }
    uint32_t *ids = NULL;
    size_t n = 0, cap = 0;
    int rc = gk_vocab_type(v) == GK_VOCAB_CHAR ? gk_char_encode(v, "\n", 1, &ids, &n, &cap, e)
                                               : GK_EFORMAT;
    if (rc == 0 && n == 1)
        *id = ids[0];
    else if (rc == 0 || rc == GK_EFORMAT)
        rc = gk_errf(e, GK_EFORMAT, "the vocabulary has neither <|endoftext|> nor a newline to "
                     "start from");
    free(ids);
    return rc;
}
