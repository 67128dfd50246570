/* output.c: shard outputs of gpt-tokenize (see output.h). */
#include "output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/io/shard.h"
#include "spill.h"
#include "stage.h"

/* One destination: a single shard or a numbered series, local or staged for a bucket. */
typedef struct target {
    int series;
    int discard;        /* a series onto /dev/null: the tokens go nowhere, no file is made */
    char prefix[4400];  /* a series: the prefix its shards are named by (-o's .bin dropped) */
    gk_shard_writer w;
    gk_shard_series s;
    tk_stage *st;
    const char *url;    /* NULL: local */
    char local[4400];   /* with url: the staged file (a series: its prefix) */
    int uploaded;       /* series with url: shards uploaded so far */
} target;

struct tk_sink {
    tk_sink_opts o;
    tk_stage stage;
    target train, val; /* val: with a validation split */
    int split, head;   /* a validation split; of the first documents or tokens (no spill) */
    int64_t tokens, docs;
    int64_t val_written, val_docs; /* head split: tokens and documents sent to val */
    int in_val;        /* head split by documents: the current document goes to val */
    /* validation split: the tokens and each document's first token index, in temporary files
     * until finish, when the split point is known */
    tk_spill held, starts;
    int64_t ndocs;
};

int tk_output_special(const char *path)
{
    struct stat st, null;
    if (!path || strcmp(path, "-") == 0 || gk_s3_is_url(path) || stat(path, &st) != 0)
        return TK_OUT_FILE;
    if (S_ISCHR(st.st_mode) && stat("/dev/null", &null) == 0 && S_ISCHR(null.st_mode) &&
        st.st_rdev == null.st_rdev)
        return TK_OUT_NULL;
    return S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || S_ISFIFO(st.st_mode) ? TK_OUT_DEVICE
                                                                              : TK_OUT_FILE;
}

size_t tk_output_prefix_len(const char *out)
{
    size_t n = strlen(out);
    return n > 4 && strcmp(out + n - 4, ".bin") == 0 && out[n - 5] != '/' ? n - 4 : n;
}

/* Numbered shards onto a device or FIFO: /dev/null discards them, anything else is refused
 * (the shards are files beside it, which must not be made in /dev). */
static int series_special(target *t, const char *path, gk_err *e)
{
    int kind = tk_output_special(path);
    struct stat st;
    t->discard = kind == TK_OUT_NULL;
    if (kind != TK_OUT_DEVICE)
        return 0;
    int fifo = stat(path, &st) == 0 && S_ISFIFO(st.st_mode);
    return gk_errf(e, GK_EUSAGE,
                   "-o %s is a %s, not a prefix: numbered shards "
                   "(--shard-tokens) are files PREFIX_000000.bin, ...; name "
                   "a prefix in a directory (-o /dev/null discards them)",
                   path, fifo ? "FIFO" : "device");
}

static int target_open(target *t, tk_stage *st, const char *path, int64_t shard_tokens,
                       const tk_sink_opts *o, gk_err *e)
{
    t->series = shard_tokens > 0;
    t->st = st;
    if (t->series) { /* -o train.bin: train_000000.bin, ... */
        int rc = series_special(t, path, e);
        if (rc || t->discard)
            return rc;
        snprintf(t->prefix, sizeof t->prefix, "%.*s", (int)tk_output_prefix_len(path), path);
        path = t->prefix;
    }
    t->url = path && gk_s3_is_url(path) ? path : NULL;
    int rc = tk_stage_path(st, path, t->local, sizeof t->local, e);
    if (rc)
        return rc;
    path = t->url ? t->local : path;
    if (t->series)
        return gk_shard_series_init(&t->s, path, shard_tokens, o->vocab_size, o->fingerprint, e);
    return gk_shard_writer_open(&t->w, path, o->vocab_size, o->fingerprint, e);
}

/* A series in a bucket: uploads the shards before number upto (complete ones). */
static int upload_shards(target *t, int upto, gk_err *e)
{
    int rc = 0;
    for (; rc == 0 && t->url && t->uploaded < upto; t->uploaded++) {
        char path[4500], url[2200];
        snprintf(path, sizeof path, "%s_%06d.bin", t->local, t->uploaded);
        snprintf(url, sizeof url, "%s_%06d.bin", t->url, t->uploaded);
        rc = tk_stage_put(t->st, path, url, e);
    }
    return rc;
}

static int target_write(target *t, const uint32_t *ids, size_t n, gk_err *e)
{
    if (t->discard)
        return 0;
    if (!t->series)
        return gk_shard_writer_write(&t->w, ids, n, e);
    int rc = gk_shard_series_write(&t->s, ids, n, e);
    return rc ? rc : upload_shards(t, t->s.open ? t->s.index - 1 : t->s.index, e);
}

static int target_finish(target *t, gk_err *e)
{
    if (t->discard)
        return 0;
    int rc = t->series ? gk_shard_series_finish(&t->s, e) : gk_shard_writer_finish(&t->w, e);
    if (rc || !t->url)
        return rc;
    return t->series ? upload_shards(t, t->s.index, e) : tk_stage_put(t->st, t->local, t->url, e);
}

/* A run that fails leaves none of its output: besides the shard being written, a series' shards
 * completed by this run go too (from the bucket where uploaded, and from the staging folder). */
static void target_abort(target *t)
{
    if (t->discard)
        return;
    if (!t->series) {
        gk_shard_writer_abort(&t->w);
        return;
    }
    int done = t->s.index - t->s.open;
    gk_shard_series_abort(&t->s);
    for (int i = 0; i < done; i++) {
        char path[4500], url[2200];
        snprintf(path, sizeof path, "%s_%06d.bin", t->local, i);
        unlink(path);
        if (t->url && i < t->uploaded) {
            snprintf(url, sizeof url, "%s_%06d.bin", t->url, i);
            tk_stage_delete(t->st, url);
        }
    }
}

/* Removes a single shard committed already. */
static void target_remove(target *t, const char *path)
{
    if (t->url)
        tk_stage_delete(t->st, t->url);
    else if (strcmp(path, "-") != 0)
        unlink(path);
}

/* Every output is opened here, so that a wrong path is said before any input is read; with a
 * validation split they are written only at finish. */
int tk_sink_open(tk_sink **out, const tk_sink_opts *o, gk_err *e)
{
    tk_sink *s = calloc(1, sizeof *s);
    if (!s)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    s->o = *o;
    s->stage = (tk_stage){.s3 = o->s3, .tmpdir = o->tmpdir ? o->tmpdir : "/tmp"};
    s->head = o->val_docs > 0 || o->val_tokens > 0;
    s->split = s->head || o->val_fraction > 0;
    int rc = target_open(&s->train, &s->stage, o->output, o->shard_tokens, o, e);
    if (rc == 0 && s->split && (rc = target_open(&s->val, &s->stage, o->val_output, 0, o, e)))
        target_abort(&s->train);
    if (rc) {
        tk_stage_close(&s->stage);
        free(s);
        return rc;
    }
    if (o->val_fraction > 0 &&
        ((rc = tk_spill_open(&s->held, s->stage.tmpdir, "the tokens held for --val-fraction", e)) ||
         (rc = tk_spill_open(&s->starts, s->stage.tmpdir, "the documents held for --val-fraction",
                             e)))) {
        tk_sink_abort(s);
        return rc;
    }
    *out = s;
    return 0;
}

int tk_sink_doc(tk_sink *s, gk_err *e)
{
    s->docs++;
    if (s->head) {
        s->in_val = s->o.val_docs > 0 ? s->docs <= s->o.val_docs : s->val_written < s->o.val_tokens;
        s->val_docs += s->in_val;
    }
    if (s->o.val_fraction <= 0)
        return 0;
    int64_t at = s->held.size / (int64_t)sizeof(uint32_t);
    s->ndocs++;
    return tk_spill_write(&s->starts, &at, sizeof at, e);
}

/* Head split: the first documents (or tokens) to val, the rest to train. */
static int head_write(tk_sink *s, const uint32_t *ids, size_t n, gk_err *e)
{
    size_t k = s->in_val ? n : 0;
    if (s->o.val_tokens > 0) {
        int64_t left = s->o.val_tokens - s->val_written;
        k = left <= 0 ? 0 : (int64_t)n < left ? n : (size_t)left;
    }
    s->val_written += (int64_t)k;
    int rc = k ? target_write(&s->val, ids, k, e) : 0;
    return rc || k == n ? rc : target_write(&s->train, ids + k, n - k, e);
}

int tk_sink_write(tk_sink *s, const uint32_t *ids, size_t n, gk_err *e)
{
    if (s->o.max_tokens > 0 && (int64_t)n > s->o.max_tokens - s->tokens)
        n = (size_t)(s->o.max_tokens - s->tokens);
    s->tokens += (int64_t)n;
    if (n == 0)
        return 0;
    if (s->head)
        return head_write(s, ids, n, e);
    if (s->o.val_fraction <= 0)
        return target_write(&s->train, ids, n, e);
    return tk_spill_write(&s->held, ids, n * sizeof *ids, e);
}

/* Token index where validation starts: a document boundary, or a token count for one doc. */
static int split_point(tk_sink *s, int64_t *cut, gk_err *e)
{
    double keep = 1.0 - s->o.val_fraction;
    int64_t held_n = s->held.size / (int64_t)sizeof(uint32_t);
    if (s->ndocs > 1) {
        int64_t train_docs = (int64_t)((double)s->ndocs * keep);
        if (train_docs == 0)
            train_docs = 1;
        *cut = held_n;
        if (train_docs >= s->ndocs)
            return 0;
        int rc = tk_spill_rewind(&s->starts, e);
        return rc ? rc : tk_spill_pread(&s->starts, cut, sizeof *cut,
                                        train_docs * (int64_t)sizeof *cut, e);
    }
    *cut = (int64_t)((double)held_n * keep);
    return 0;
}

/* Copies the held tokens: the first cut to the training output, the rest to validation. */
static int copy_held(tk_sink *s, int64_t cut, gk_err *e)
{
    enum { CHUNK = 1 << 14 };
    static uint32_t buf[CHUNK];
    int64_t n = s->held.size / (int64_t)sizeof(uint32_t);
    int rc = tk_spill_rewind(&s->held, e);
    for (int64_t i = 0; rc == 0 && i < n;) {
        int64_t stop = i < cut ? cut : n;
        size_t k = stop - i < CHUNK ? (size_t)(stop - i) : CHUNK;
        rc = tk_spill_read(&s->held, buf, k * sizeof *buf, e);
        if (rc == 0)
            rc = target_write(i < cut ? &s->train : &s->val, buf, k, e);
        i += (int64_t)k;
    }
    return rc;
}

/* Commits both shards of a split, validation first. */
static int finish_split(tk_sink *s, int rc, gk_err *e)
{
    if (!rc && !(rc = target_finish(&s->val, e))) {
        /* The last of the training data reaches the disk only now: if it fails (a full disk),
         * the validation shard just committed goes too, so that no half of a split is left. */
        if ((rc = target_finish(&s->train, e)))
            target_remove(&s->val, s->o.val_output);
        return rc;
    }
    target_abort(&s->val);
    target_abort(&s->train);
    return rc;
}

static int write_split(tk_sink *s, gk_err *e)
{
    int64_t cut = 0;
    int rc = split_point(s, &cut, e);
    if (rc == 0 && cut == s->held.size / (int64_t)sizeof(uint32_t))
        gk_warn("--val-fraction %g leaves the validation shard empty", s->o.val_fraction);
    if (!rc)
        rc = copy_held(s, cut, e);
    return finish_split(s, rc, e);
}

static int write_head(tk_sink *s, gk_err *e)
{
    if (s->val_written == s->tokens)
        gk_warn("%s %lld takes every document: the training output is empty",
                s->o.val_docs > 0 ? "--val-docs" : "--val-tokens",
                (long long)(s->o.val_docs > 0 ? s->o.val_docs : s->o.val_tokens));
    return finish_split(s, 0, e);
}

static void sink_free(tk_sink *s)
{
    tk_spill_close(&s->held);
    tk_spill_close(&s->starts);
    tk_stage_close(&s->stage);
    free(s);
}

int tk_sink_finish(tk_sink *s, gk_err *e)
{
    int rc = s->head ? write_head(s, e)
             : s->o.val_fraction > 0 ? write_split(s, e) : target_finish(&s->train, e);
    sink_free(s);
    return rc;
}

void tk_sink_abort(tk_sink *s)
{
    if (!s)
        return;
    target_abort(&s->train);
    if (s->split)
        target_abort(&s->val);
    sink_free(s);
}

int64_t tk_sink_tokens(const tk_sink *s) { return s->tokens; }

int tk_sink_full(const tk_sink *s) { return s->o.max_tokens > 0 && s->tokens >= s->o.max_tokens; }

int64_t tk_sink_docs(const tk_sink *s) { return s->docs; }

int64_t tk_sink_val_docs(const tk_sink *s) { return s->val_docs; }

int64_t tk_sink_val_tokens(const tk_sink *s) { return s->val_written; }
