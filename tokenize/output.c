/* output.c: shard outputs of gpt-tokenize (see output.h). */
#include "output.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/io/shard.h"

/* One destination: a single shard or a numbered series. */
typedef struct target {
    int series;
    gk_shard_writer w;
    gk_shard_series s;
} target;

struct tk_sink {
    tk_sink_opts o;
    target train, val; /* val: with --val-fraction */
    int64_t tokens;
    /* validation split: everything held until finish */
    uint32_t *held;
    size_t held_n, held_cap;
    size_t *doc_starts;
    size_t ndocs, docs_cap;
};

static int target_open(target *t, const char *path, int64_t shard_tokens, const tk_sink_opts *o,
                       gk_err *e)
{
    t->series = shard_tokens > 0;
    if (t->series)
        return gk_shard_series_init(&t->s, path, shard_tokens, o->vocab_size, o->fingerprint, e);
    return gk_shard_writer_open(&t->w, path, o->vocab_size, o->fingerprint, e);
}

static int target_write(target *t, const uint32_t *ids, size_t n, gk_err *e)
{
    return t->series ? gk_shard_series_write(&t->s, ids, n, e)
                     : gk_shard_writer_write(&t->w, ids, n, e);
}

static int target_finish(target *t, gk_err *e)
{
    return t->series ? gk_shard_series_finish(&t->s, e) : gk_shard_writer_finish(&t->w, e);
}

static void target_abort(target *t)
{
    if (t->series)
        gk_shard_series_abort(&t->s);
    else
        gk_shard_writer_abort(&t->w);
}

/* Every output is opened here, so that a wrong path is said before any input is read; with a
 * validation split they are written only at finish. */
int tk_sink_open(tk_sink **out, const tk_sink_opts *o, gk_err *e)
{
    tk_sink *s = calloc(1, sizeof *s);
    if (!s)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    s->o = *o;
    int rc = target_open(&s->train, o->output, o->shard_tokens, o, e);
    if (rc == 0 && o->val_fraction > 0 && (rc = target_open(&s->val, o->val_output, 0, o, e)))
        target_abort(&s->train);
    if (rc) {
        free(s);
        return rc;
    }
    *out = s;
    return 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 1024;
    while (c < need)
        c *= 2;
    void *np = realloc(*p, c * size);
    if (!np)
        return -1;
    *p = np;
    *cap = c;
    return 0;
}

int tk_sink_doc(tk_sink *s, gk_err *e)
{
    if (s->o.val_fraction <= 0)
        return 0;
    if (grow((void **)&s->doc_starts, &s->docs_cap, s->ndocs + 1, sizeof(size_t)))
        return gk_errf(e, GK_ENOMEM, "out of memory holding documents for the validation split");
    s->doc_starts[s->ndocs++] = s->held_n;
    return 0;
}

int tk_sink_write(tk_sink *s, const uint32_t *ids, size_t n, gk_err *e)
{
    s->tokens += (int64_t)n;
    if (s->o.val_fraction <= 0)
        return target_write(&s->train, ids, n, e);
    if (grow((void **)&s->held, &s->held_cap, s->held_n + n, sizeof(uint32_t)))
        return gk_errf(e, GK_ENOMEM, "out of memory holding tokens for the validation split");
    memcpy(s->held + s->held_n, ids, n * sizeof *ids);
    s->held_n += n;
    return 0;
}

/* Token index where validation starts: a document boundary, or a token count for one doc. */
static size_t split_point(const tk_sink *s)
{
    double keep = 1.0 - s->o.val_fraction;
    if (s->ndocs > 1) {
        size_t train_docs = (size_t)((double)s->ndocs * keep);
        if (train_docs == 0)
            train_docs = 1;
        return train_docs < s->ndocs ? s->doc_starts[train_docs] : s->held_n;
    }
    return (size_t)((double)s->held_n * keep);
}

static int write_split(tk_sink *s, gk_err *e)
{
    size_t cut = split_point(s);
    if (cut == s->held_n)
        gk_warn("--val-fraction %g leaves the validation shard empty", s->o.val_fraction);
    int rc = target_write(&s->train, s->held, cut, e);
    if (!rc)
        rc = target_write(&s->val, s->held + cut, s->held_n - cut, e);
    if (!rc && !(rc = target_finish(&s->val, e))) {
        /* The last of the training data reaches the disk only now: if it fails (a full disk),
         * the validation shard just committed goes too, so that no half of a split is left. */
        if ((rc = target_finish(&s->train, e)) && strcmp(s->o.val_output, "-") != 0)
            unlink(s->o.val_output);
        return rc;
    }
    target_abort(&s->val);
    target_abort(&s->train);
    return rc;
}

static void sink_free(tk_sink *s)
{
    free(s->held);
    free(s->doc_starts);
    free(s);
}

int tk_sink_finish(tk_sink *s, gk_err *e)
{
    int rc = s->o.val_fraction > 0 ? write_split(s, e) : target_finish(&s->train, e);
    sink_free(s);
    return rc;
}

void tk_sink_abort(tk_sink *s)
{
    if (!s)
        return;
    target_abort(&s->train);
    if (s->o.val_fraction > 0)
        target_abort(&s->val);
    sink_free(s);
}

int64_t tk_sink_tokens(const tk_sink *s) { return s->tokens; }
