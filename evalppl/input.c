/* input.c: inputs -> token streams (see input.h). */
#include "evalppl/input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/text/encode_text.h"
#include "common/io/readall.h"
#include "common/le.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/io/shard.h"

/* tokens of width 2 or 4 at p[0..count) -> s->ids, each checked against vocab_limit */
static int take_tokens(ep_stream *s, const unsigned char *p, size_t count, int width,
                       uint32_t vocab_limit, gk_err *e)
{
    s->ids = malloc(sizeof *s->ids * (count ? count : 1));
    if (!s->ids) return gk_errf(e, GK_ENOMEM, "%s: out of memory", s->name);
    size_t ok = gk_shard_decode(p, count, width, vocab_limit, s->ids);
    if (ok < count)
        return gk_errf(e, GK_EFORMAT, "%s: token %u at position %zu is outside the model's "
                       "vocabulary (%u)", s->name, width == 2 ? gk_le16(p + 2 * ok) : gk_le32(p + 4 * ok),
                       ok, vocab_limit);
    s->n = count;
    s->bytes = -1;
    return 0;
}

/* A shard header against the model's vocabulary. */
static int check_header(const char *name, const gk_shard_header *h, const gk_vocab *v,
                        uint32_t vocab_limit, gk_err *e)
{
    if (v && h->fingerprint && h->fingerprint != gk_vocab_fingerprint(v))
        return gk_errf(e, GK_EFORMAT, "%s: tokenized with another vocabulary (fingerprint %08x, "
                       "the model's is %08x)", name, h->fingerprint, gk_vocab_fingerprint(v));
    if (h->vocab_size > vocab_limit)
        return gk_errf(e, GK_EFORMAT, "%s: made with a vocabulary of %u tokens, the model has %u",
                       name, h->vocab_size, vocab_limit);
    return 0;
}

/* b[0..len): a whole shard whose header gk_shard_parse read into h */
static int take_shard(ep_stream *s, const unsigned char *b, const gk_shard_header *h,
                      const gk_vocab *v, uint32_t vocab_limit, gk_err *e)
{
    int rc = check_header(s->name, h, v, vocab_limit, e);
    if (rc) return rc;
    return take_tokens(s, b + GK_SHARD_HEADER_BYTES, (size_t)h->tokens, h->width, vocab_limit, e);
}

int ep_precheck(const char *path, const gk_vocab *v, int raw, uint32_t vocab_limit, gk_err *e)
{
    struct stat st;
    if (raw || strcmp(path, "-") == 0 || stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return 0; /* a pipe is read once, by ep_load; a missing file is its error too */
    FILE *f = fopen(path, "rb");
    if (!f) return gk_errno(e, path);
    unsigned char b[GK_SHARD_HEADER_BYTES];
    size_t n = fread(b, 1, sizeof b, f);
    int rc = ferror(f) ? gk_errno(e, path) : 0;
    fseeko(f, 0, SEEK_END);
    int64_t size = (int64_t)ftello(f);
    fclose(f);
    gk_shard_kind kind;
    gk_shard_header h;
    if (!rc) rc = gk_shard_parse(b, n, size, path, &kind, &h, e);
    return rc || kind != GK_SHARD_HEADER ? rc : check_header(path, &h, v, vocab_limit, e);
}

static int encode_text(ep_stream *s, const unsigned char *b, size_t len, const gk_vocab *v,
                       uint32_t vocab_limit, gk_err *e)
{
    if (!v)
        return gk_errf(e, GK_ENOTFOUND, "%s: text input needs a vocabulary: the checkpoint has "
                       "none; give -V", s->name);
    size_t n = 0, idcap = 0, bad = 0;
    int rc = gk_text_encode(v, (const char *)b, len, GK_ENCODE_EOT_FIRST, &s->ids, &n, &idcap,
                            &bad, e);
    if (rc == GK_EFORMAT) { /* name the input */
        char msg[sizeof e->msg];
        snprintf(msg, sizeof msg, "%s", e->msg);
        rc = gk_errf(e, GK_EFORMAT, "%s: %s", s->name, msg);
    }
    if (bad && !rc)
        gk_warn("%s: replaced %zu invalid UTF-8 sequence%s with U+FFFD", s->name, bad,
                bad == 1 ? "" : "s");
    for (size_t i = 0; !rc && i < n; i++)
        if (s->ids[i] >= vocab_limit)
            rc = gk_errf(e, GK_EFORMAT, "%s: token %u is outside the model's vocabulary (%u)",
                         s->name, s->ids[i], vocab_limit);
    s->n = n;
    s->bytes = (int64_t)len;
    return rc;
}

/* A shard, or text; binary data without a header is refused (it needs --raw to be tokens). The
 * verdict rests on the first 1024 bytes, as in every shard reader. */
static int take_any(ep_stream *s, const unsigned char *b, size_t len, const gk_vocab *v,
                    uint32_t vocab_limit, gk_err *e)
{
    gk_shard_kind kind;
    gk_shard_header h;
    size_t head = len < GK_SHARD_HEADER_BYTES ? len : GK_SHARD_HEADER_BYTES;
    int rc = gk_shard_parse(b, head, (int64_t)len, s->name, &kind, &h, e);
    if (rc)
        return rc;
    if (kind == GK_SHARD_HEADER)
        return take_shard(s, b, &h, v, vocab_limit, e);
    if (kind == GK_SHARD_RAW && len > 0)
        return gk_errf(e, GK_EFORMAT, "%s: binary data with no shard header, not text; if it holds "
                       "raw uint16 tokens (nanoGPT's .bin), give --raw", s->name);
    return encode_text(s, b, len, v, vocab_limit, e);
}

int ep_load(ep_stream *s, const char *path, const gk_vocab *v, int raw, uint32_t vocab_limit,
            gk_err *e)
{
    memset(s, 0, sizeof *s);
    int is_stdin = strcmp(path, "-") == 0;
    s->name = strdup(is_stdin ? "stdin" : path);
    if (!s->name) return gk_errf(e, GK_ENOMEM, "out of memory");
    if (is_stdin && gk_std_was_closed(STDIN_FILENO)) /* reopened on /dev/null: not an input */
        return gk_errf(e, GK_EIO, "standard input is closed (give input files, or redirect it)");
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) return gk_errno(e, path);
    char *text = NULL;
    size_t len = 0;
    int rc = gk_read_all(f, s->name, GK_READALL_NO_LIMIT, &text, &len, e);
    unsigned char *b = (unsigned char *)text;
    if (!is_stdin) fclose(f);
    if (rc) return rc;
    if (raw)
        rc = len % 2 ? gk_errf(e, GK_EFORMAT, "%s: --raw: odd size %zu (uint16 tokens)", s->name, len)
                     : take_tokens(s, b, len / 2, 2, vocab_limit, e);
    else
        rc = take_any(s, b, len, v, vocab_limit, e);
    free(b);
    return rc;
}

void ep_stream_free(ep_stream *s)
{
    free(s->name);
    free(s->ids);
    memset(s, 0, sizeof *s);
}
