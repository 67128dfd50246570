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
#include "common/io/shard_s3.h"

static gk_s3 *bucket_client; /* for s3:// inputs (ep_input_s3) */

static int check_header(const char *name, const gk_shard_header *h, const gk_vocab *v,
                        uint32_t vocab_limit, gk_err *e);

void ep_input_s3(gk_s3 *s3) { bucket_client = s3; }

/* url's bucket and key, with a client to read them. */
static int s3_where(const char *url, char *bucket, char *key, gk_err *e)
{
    if (!bucket_client)
        return gk_errf(e, GK_EUSAGE, "%s: buckets are not read here", url);
    return gk_s3_parse_url(url, bucket, 256, key, 1100, e);
}

/* The header of an object in a bucket, checked as a file's (a ranged GET). */
static int precheck_s3(const char *url, const gk_vocab *v, uint32_t vocab_limit, gk_err *e)
{
    char bucket[256], key[1100];
    gk_s3_stat st;
    gk_shard_map m = {.name = (char *)url};
    int64_t off;
    int rc = s3_where(url, bucket, key, e);
    if (!rc)
        rc = gk_s3_head(bucket_client, bucket, key, &st, e);
    if (!rc)
        rc = gk_shard_s3_header(bucket_client, bucket, key, st.size, &m, &off, e);
    gk_shard_header h = {.vocab_size = m.vocab_size, .fingerprint = m.fingerprint};
    return rc || m.raw ? rc : check_header(url, &h, v, vocab_limit, e);
}

typedef struct grow_buf {
    char *p;
    size_t n, cap;
} grow_buf;

static int to_buf(const void *data, size_t n, void *ud)
{
    grow_buf *g = ud;
    if (g->n + n + 1 > g->cap) {
        size_t cap = g->cap ? g->cap : 1 << 20;
        while (cap < g->n + n + 1)
            cap *= 2;
        char *p = realloc(g->p, cap);
        if (!p)
            return GK_ENOMEM;
        g->p = p, g->cap = cap;
    }
    memcpy(g->p + g->n, data, n);
    g->n += n;
    return 0;
}

/* A whole object in a bucket into *text (as gk_read_all reads a file). */
static int read_s3(const char *url, char **text, size_t *len, gk_err *e)
{
    char bucket[256], key[1100];
    grow_buf g = {0};
    int rc = s3_where(url, bucket, key, e);
    if (!rc)
        rc = gk_s3_get(bucket_client, bucket, key, to_buf, &g, e);
    if (rc == GK_ENOMEM)
        rc = gk_errf(e, GK_ENOMEM, "%s: out of memory", url);
    if (rc) {
        free(g.p);
        return rc;
    }
    *text = g.p ? g.p : calloc(1, 1);
    *len = g.n;
    return *text ? 0 : gk_errf(e, GK_ENOMEM, "%s: out of memory", url);
}

/* tokens of width 2 or 4 at p[0..count) -> s->ids, each checked against vocab_limit */
static int take_tokens(ep_stream *s, const unsigned char *p, size_t count, int width,
                       uint32_t vocab_limit, gk_err *e)
{
    s->ids = malloc(sizeof *s->ids * (count ? count : 1));
    if (!s->ids) return gk_errf(e, GK_ENOMEM, "%s: out of memory", s->name);
    size_t ok = gk_shard_decode(p, count, width, vocab_limit, s->ids);
    if (ok < count)
        return gk_errf(e, GK_EFORMAT,
                       "%s: token %u at position %zu is outside the model's vocabulary (%u)",
                       s->name, width == 2 ? gk_le16(p + 2 * ok) : gk_le32(p + 4 * ok), ok,
                       vocab_limit);
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
    if (!raw && gk_s3_is_url(path))
        return precheck_s3(path, v, vocab_limit, e);
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
    char *text = NULL;
    size_t len = 0;
    int rc;
    if (gk_s3_is_url(path)) {
        rc = read_s3(path, &text, &len, e);
    } else {
        FILE *f = is_stdin ? stdin : fopen(path, "rb");
        if (!f) return gk_errno(e, path);
        rc = gk_read_all(f, s->name, GK_READALL_NO_LIMIT, &text, &len, e);
        if (!is_stdin) fclose(f);
    }
    unsigned char *b = (unsigned char *)text;
    if (rc) return rc;
    if (raw)
        rc = len % 2
                 ? gk_errf(e, GK_EFORMAT, "%s: --raw: odd size %zu (uint16 tokens)", s->name, len)
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
