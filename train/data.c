/* data.c: shards mapped or in a bucket, windows drawn by a counter-based hash (see data.h).
 * Shards in a bucket (s3data.h) are read by ranged GETs, ahead of the run (readahead.h). */
#include "data.h"

#include <glob.h>
#include <stdlib.h>
#include <string.h>

#include "common/io/shard.h"
#include "common/s3/s3.h"
#include "common/le.h"
#include "common/log.h"
#include "kernels/rng.h"
#include "readahead.h"
#include "s3data.h"

struct tr_data {
    gk_shard_map *shards;
    int64_t *obj;         /* shard i's object in s3 (s3data.h), -1: a mapped file */
    int64_t *data_off;    /* where the tokens of object obj[i] start */
    int64_t *first_start; /* prefix sums of window starts: shard i owns
                           * [first_start[i], first_start[i+1]) */
    size_t n;
    int T;
    uint32_t vocab_limit;
    int64_t tokens;
    const tr_data_remote *remote; /* while opening */
    const char *what;
    tr_s3data *s3;        /* NULL: no shard in a bucket */
    tr_readahead *ra;
    unsigned char *win;   /* one window's bytes (the run's thread) */
};

/* One splitmix64 step from state x: the golden-gamma increment, then rng.h's output mixer. */
static uint64_t mix(uint64_t x)
{
    return gk_rng_mix(x + 0x9e3779b97f4a7c15ULL);
}

uint64_t tr_hash(uint64_t a, uint64_t b, uint64_t c, uint64_t d)
{
    return mix(mix(mix(mix(a) ^ b) ^ c) ^ d);
}

/* Room for one more shard. */
static int grow(tr_data *d, gk_err *e)
{
    gk_shard_map *ns = realloc(d->shards, (d->n + 1) * sizeof *ns);
    if (ns)
        d->shards = ns;
    int64_t *no = ns ? realloc(d->obj, (d->n + 1) * sizeof *no) : NULL;
    if (no)
        d->obj = no;
    int64_t *nd = no ? realloc(d->data_off, (d->n + 1) * sizeof *nd) : NULL;
    if (!nd)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    d->data_off = nd;
    return 0;
}

/* Shard d->n - 1 holds a window at least. */
static int check_count(tr_data *d, gk_err *e)
{
    const gk_shard_map *m = &d->shards[d->n - 1];
    if (m->count < d->T + 1)
        return gk_errf(e, GK_EUSAGE, "%s: %s holds %lld tokens, fewer than block_size + 1 = %d",
                       d->what, m->name, (long long)m->count, d->T + 1);
    d->tokens += m->count;
    return 0;
}

static int add_shard(tr_data *d, const char *path, gk_err *e)
{
    int rc = grow(d, e);
    if (!rc)
        rc = gk_shard_map_open(&d->shards[d->n], path, e);
    if (rc)
        return rc;
    d->obj[d->n] = -1;
    d->data_off[d->n++] = 0;
    return check_count(d, e);
}

/* s3data.h's callback: a shard in a bucket, header checked. */
static int add_remote(void *ud, gk_shard_map *m, size_t obj, int64_t data_off, gk_err *e)
{
    tr_data *d = ud;
    int rc = grow(d, e);
    if (rc) {
        gk_shard_map_close(m);
        return rc;
    }
    d->shards[d->n] = *m;
    d->obj[d->n] = (int64_t)obj;
    d->data_off[d->n++] = data_off;
    return check_count(d, e);
}

static int add_pattern(tr_data *d, const char *pattern, const char *what, gk_err *e)
{
    if (gk_s3_is_url(pattern)) {
        if (!d->remote)
            return gk_errf(e, GK_EUSAGE, "%s: '%s': no settings for a bucket", what, pattern);
        int rc = d->s3 ? 0 : tr_s3data_open(&d->s3, d->remote->conf, e);
        return rc ? rc : tr_s3data_add(d->s3, pattern, what, add_remote, d, e);
    }
    glob_t g;
    int r = glob(pattern, 0, NULL, &g);
    if (r == GLOB_NOMATCH)
        return gk_errf(e, GK_ENOTFOUND, "%s: no file matches '%s'", what, pattern);
    if (r != 0)
        return gk_errf(e, GK_EIO, "%s: cannot expand '%s'", what, pattern);
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++)
        rc = add_shard(d, g.gl_pathv[i], e);
    globfree(&g);
    return rc;
}

/* The shard and start of window j of batch `batch` in stream. */
static size_t locate(const tr_data *d, uint64_t seed, int stream, uint64_t batch, uint64_t j,
                     int64_t *start)
{
    int64_t total = d->first_start[d->n];
    int64_t u = (int64_t)(tr_hash(seed, (uint64_t)stream, batch, j) % (uint64_t)total);
    size_t lo = 0, hi = d->n; /* find shard i with first_start[i] <= u < first_start[i+1] */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (d->first_start[mid] <= u)
            lo = mid;
        else
            hi = mid;
    }
    *start = u - d->first_start[lo];
    return lo;
}

/* readahead.h's fetch: a window's T + 1 tokens, as they are in the shard. */
static int fetch_window(void *ud, uint64_t seed, int stream, uint64_t batch, uint64_t j,
                        unsigned char *out, gk_err *e)
{
    const tr_data *d = ud;
    int64_t start;
    size_t i = locate(d, seed, stream, batch, j, &start);
    const gk_shard_map *m = &d->shards[i];
    size_t n = (size_t)(d->T + 1) * (size_t)m->width;
    if (d->obj[i] < 0) {
        memcpy(out, m->tokens + (size_t)start * (size_t)m->width, n);
        return 0;
    }
    int rc = tr_s3data_read(d->s3, (size_t)d->obj[i], d->data_off[i] + start * m->width, n, out, e);
    if (rc == GK_EIO || rc == GK_EFORMAT)
        rc = gk_errf(e, rc, "%s: %s", d->what, e->msg);
    return rc;
}

int tr_data_open(tr_data **out, const char *patterns, int T, uint32_t vocab_limit,
                 const tr_data_remote *remote, const char *what, gk_err *e)
{
    tr_data *d = calloc(1, sizeof *d);
    char *copy = strdup(patterns ? patterns : "");
    if (!d || !copy) {
        free(d);
        free(copy);
        return gk_errf(e, GK_ENOMEM, "out of memory");
    }
    d->T = T;
    d->vocab_limit = vocab_limit;
    d->remote = remote;
    d->what = what;
    int rc = 0;
    char *save = NULL;
    for (char *p = strtok_r(copy, ", ", &save); rc == 0 && p; p = strtok_r(NULL, ", ", &save))
        rc = add_pattern(d, p, what, e);
    free(copy);
    if (rc == 0 && d->n == 0)
        rc = gk_errf(e, GK_EUSAGE, "%s: no shards given", what);
    if (rc == 0 && !(d->first_start = malloc((d->n + 1) * sizeof *d->first_start)))
        rc = gk_errf(e, GK_ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < d->n; i++)
        d->first_start[i + 1] = (i ? d->first_start[i] : 0) + d->shards[i].count - T;
    if (rc == 0)
        d->first_start[0] = 0;
    size_t wbytes = (size_t)(T + 1) * 4;
    if (rc == 0 && d->s3 && !(d->win = malloc(wbytes)))
        rc = gk_errf(e, GK_ENOMEM, "out of memory");
    if (rc == 0 && d->s3)
        rc = tr_ra_open(&d->ra, wbytes, remote->readahead, remote->threads, fetch_window, d, e);
    d->remote = NULL;
    if (rc) {
        tr_data_close(d);
        return rc;
    }
    *out = d;
    return 0;
}

int tr_data_plan(tr_data *d, uint64_t seed, int stream, uint64_t first, uint64_t stride,
                 uint64_t count, uint64_t j0, uint64_t n, gk_err *e)
{
    if (!d->ra)
        return 0;
    tr_ra_plan p = {seed, first, stride, count, j0, n};
    return tr_ra_plan_set(d->ra, stream, &p, e);
}

/* The largest token of n at p (width 2 or 4, little-endian): a loop the compiler vectorizes. */
static uint32_t max_token(const unsigned char *p, size_t n, int width)
{
    uint32_t mx = 0;
    if (width == 2)
        for (size_t i = 0; i < n; i++) {
            uint32_t v = (uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8;
            mx = v > mx ? v : mx;
        }
    else
        for (size_t i = 0; i < n; i++) {
            uint32_t v = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 |
                         (uint32_t)p[4 * i + 2] << 16 | (uint32_t)p[4 * i + 3] << 24;
            mx = v > mx ? v : mx;
        }
    return mx;
}

/* Every token of shard m below vocab_size: a pass at memory speed (16M tokens at a time), then,
 * in a chunk that has one too many, the first such token for the message. */
static int scan_tokens(const gk_shard_map *m, uint32_t vocab_size, const char *what, gk_err *e)
{
    enum { CHUNK = 1 << 24 };
    if (m->width == 2 && vocab_size >= 65536)
        return 0;
    for (int64_t at = 0; at < m->count; at += CHUNK) {
        size_t n = m->count - at < CHUNK ? (size_t)(m->count - at) : CHUNK;
        const unsigned char *p = m->tokens + (size_t)at * (size_t)m->width;
        if (max_token(p, n, m->width) < vocab_size)
            continue;
        for (size_t i = 0;; i++)
            if (max_token(p + i * (size_t)m->width, 1, m->width) >= vocab_size)
                return gk_errf(e, GK_EUSAGE,
                               "%s: %s: token %u at position %lld is outside the model's "
                               "vocabulary (vocab_size %u)",
                               what, m->name, max_token(p + i * (size_t)m->width, 1, m->width),
                               (long long)(at + (int64_t)i), vocab_size);
    }
    return 0;
}

int tr_data_check(tr_data *d, uint32_t vocab_size, uint32_t *fingerprint, const char *whose,
                  const char *what, gk_err *e)
{
    for (size_t i = 0; i < d->n; i++) {
        const gk_shard_map *m = &d->shards[i];
        if (m->fingerprint && *fingerprint && m->fingerprint != *fingerprint)
            return gk_errf(e, GK_EUSAGE,
                           "%s: %s was tokenized with another vocabulary "
                           "(fingerprint %08x) than %s (%08x)",
                           what, m->name, m->fingerprint, whose, *fingerprint);
        if (m->fingerprint && !*fingerprint)
            *fingerprint = m->fingerprint;
        if (m->vocab_size > vocab_size)
            return gk_errf(e, GK_EUSAGE, "%s: %s was made with a vocabulary of %u tokens, but the "
                           "model has %u (vocab_size)", what, m->name, m->vocab_size, vocab_size);
        /* a bucket's: as read */
        int rc = m->vocab_size || d->obj[i] >= 0 ? 0 : scan_tokens(m, vocab_size, what, e);
        if (rc)
            return rc;
    }
    d->vocab_limit = vocab_size;
    return 0;
}

int64_t tr_data_tokens(const tr_data *d) { return d->tokens; }
size_t tr_data_shards(const tr_data *d) { return d->n; }
uint32_t tr_data_fingerprint(const tr_data *d) { return d->shards[0].fingerprint; }
uint32_t tr_data_vocab_size(const tr_data *d) { return d->shards[0].vocab_size; }
const char *tr_data_first_name(const tr_data *d) { return d->shards[0].name; }

int tr_data_window(const tr_data *d, uint64_t seed, int stream, uint64_t batch, uint64_t j,
                   uint32_t *x, uint32_t *y, gk_err *e)
{
    int64_t start;
    size_t i = locate(d, seed, stream, batch, j, &start);
    const gk_shard_map *m = &d->shards[i];
    if (!d->ra) {
        int rc = gk_shard_map_get(m, start, (size_t)d->T, d->vocab_limit, x, e);
        return rc ? rc : gk_shard_map_get(m, start + 1, (size_t)d->T, d->vocab_limit, y, e);
    }
    int rc = tr_ra_get(d->ra, seed, stream, batch, j, d->win, e);
    if (rc)
        return rc;
    size_t T = (size_t)d->T, w = (size_t)m->width;
    size_t ok = gk_shard_decode(d->win, T, m->width, d->vocab_limit, x);
    if (ok == T) {
        memcpy(y, x + 1, (T - 1) * sizeof *y);
        ok += gk_shard_decode(d->win + T * w, 1, m->width, d->vocab_limit, y + T - 1);
    }
    if (ok <= T) {
        const unsigned char *p = d->win + ok * w;
        return gk_errf(e, GK_EFORMAT,
                       "%s: %s: token %u at position %lld is outside the vocabulary (%u)", d->what,
                       m->name, w == 2 ? gk_le16(p) : gk_le32(p), (long long)(start + (int64_t)ok),
                       d->vocab_limit);
    }
    return 0;
}

void tr_data_close(tr_data *d)
{
    if (!d)
        return;
    if (d->ra) {
        long waited, asked;
        tr_ra_counts(d->ra, &waited, &asked);
        gk_verbose("%s: %ld windows read from the bucket, %ld of them not read ahead (waited for)",
                   d->what, asked, waited);
    }
    tr_ra_close(d->ra); /* first: its threads read the shards */
    if (d->s3) {
        long retries = tr_s3data_retries(d->s3);
        if (retries)
            gk_warn("%s: %ld requests retried", d->what, retries);
    }
    tr_s3data_close(d->s3);
    for (size_t i = 0; i < d->n; i++)
        gk_shard_map_close(&d->shards[i]);
    free(d->shards);
    free(d->obj);
    free(d->data_off);
    free(d->win);
    free(d->first_start);
    free(d);
}

/* ---- the data's vocabulary ---- */

/* The vocabulary at path if it loads and is the data's (fingerprint fp), else NULL. */
static gk_vocab *data_vocab_at(const char *path, uint32_t fp)
{
    gk_vocab *v = NULL;
    gk_err quiet;
    if (gk_vocab_load(&v, path, &quiet) == 0 && gk_vocab_fingerprint(v) != fp) {
        gk_vocab_free(v); /* some other vocabulary: not the data's */
        v = NULL;
    }
    return v;
}

gk_vocab *tr_data_find_vocab(const tr_data *d, char *path, size_t cap)
{
    uint32_t fp = tr_data_fingerprint(d);
    const char *first = tr_data_first_name(d);
    const char *slash = strrchr(first, '/');
    char dir[4096];
    gk_vocab *v = NULL;
    if (fp && !gk_s3_is_url(first)) {
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - first) : 1, slash ? first : ".");
        snprintf(path, cap, "%s", dir);
        if (!(v = data_vocab_at(path, fp))) {
            snprintf(path, cap, "%s/vocab.json", dir);
            v = data_vocab_at(path, fp);
        }
    }
    gk_err quiet;
    if (!v && gk_vocab_find(path, cap, NULL, &quiet) == 0)
        v = data_vocab_at(path, fp);
    if (!v)
        path[0] = '\0';
    return v;
}
