/* learn.c: gpt-tokenize --learn (learn.h): the pre-tokens counted (learn_count.h), the merge
 * loop with a progress line, and the vocabulary directory written whole. */
#include "learn.h"
#include "learn_count.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/io/outfile.h"
#include "common/log.h"
#include "common/progress.h"
#include "common/text/bpe_learn.h"
#include "common/text/vocab.h"

/* ---- the learning ---- */

typedef struct merging {
    gk_progress bar;
    double t0;
} merging;

/* The bytes of a token as GPT-2's byte alphabet writes them (a JSON key's text), into out:
 * the printable bytes as themselves, the others from U+0100 on in byte order. */
static size_t byte_level(const unsigned char *b, size_t n, char *out)
{
    static uint32_t cp_of[256];
    if (!cp_of[0]) /* (the table once; byte 0 maps to U+0100, never 0) */
        for (uint32_t c = 0, k = 0; c < 256; c++) {
            int printable = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174;
            cp_of[c] = printable ? c : 256u + k++;
        }
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = cp_of[b[i]];
        if (cp < 0x80) out[o++] = (char)cp;
        else out[o++] = (char)(0xC0 | cp >> 6), out[o++] = (char)(0x80 | (cp & 63));
    }
    out[o] = '\0';
    return o;
}

static void on_merge(void *ctx, size_t done, size_t total, const unsigned char *tok, size_t len)
{
    merging *m = ctx;
    char note[160], text[64];
    byte_level(tok, len < 20 ? len : 20, text);
    double secs = gk_now() - m->t0, left = done ? secs / (double)done * (double)(total - done) : 0;
    snprintf(note, sizeof note, "merge %zu/%zu %s, %.0f s left", done, total, text, left);
    gk_progress_line(&m->bar, total ? (double)done / (double)total : 0, note);
}

/* ---- the vocabulary directory ---- */

/* The special tokens after <|endoftext|> (learn.h's). */
typedef struct specials {
    const char *const *tok;
    int n;
} specials;

/* Adds the special tokens to encoder.json's object after the learned ones: <|endoftext|>, then
 * sp's (their text is their byte-level key: printable ASCII). GK_EUSAGE for one the text made. */
static int add_specials(json_t *enc, size_t first, const specials *sp, gk_err *e)
{
    for (int i = 0; i < sp->n; i++)
        if (json_object_get(enc, sp->tok[i]))
            return gk_errf(e, GK_EUSAGE, "--special '%s' is a token the text made: name one the "
                           "pre-tokenizer splits (as <|...|>)", sp->tok[i]);
    int oom = json_object_set_new(enc, "<|endoftext|>", json_integer((json_int_t)first)) != 0;
    for (int i = 0; !oom && i < sp->n; i++)
        oom = json_object_set_new(enc, sp->tok[i], json_integer((json_int_t)(first + 1 + i)));
    return oom ? gk_errf(e, GK_ENOMEM, "out of memory writing the vocabulary") : 0;
}

/* encoder.json's object (token -> id: the learned ids, then the special tokens) and the merges
 * text (vocab.bpe, its first line naming the pattern if not GPT-2's), as dumped texts. */
static int vocab_texts(const gk_bpe_learned *l, const specials *sp, int pattern, char **encoder,
                       char **merges, gk_err *e)
{
    size_t cap = 64, n = 0, len;
    char *m = malloc(cap), *key = NULL, *a = NULL;
    json_t *enc = json_object();
    size_t longest = 1;
    for (uint32_t id = 0; id < l->n_tokens; id++)
        if (gk_bpe_learned_token(l, id, &len) && len > longest) longest = len;
    key = malloc(2 * longest + 1), a = malloc(2 * longest + 1);
    int oom = !m || !enc || !key || !a;
    for (uint32_t id = 0; !oom && id < l->n_tokens; id++) {
        const unsigned char *t = gk_bpe_learned_token(l, id, &len);
        byte_level(t, len, key);
        oom = json_object_set_new(enc, key, json_integer(id)) != 0;
    }
    if (!oom)
        n = (size_t)snprintf(m, cap, "#version: 0.2%s%s\n", pattern ? " pattern: " : "",
                             pattern ? gk_pattern_name(pattern) : "");
    for (size_t i = 0; !oom && i < l->n_merges; i++) {
        const unsigned char *ta = gk_bpe_learned_token(l, l->left[i], &len);
        size_t la = byte_level(ta, len, a);
        const unsigned char *tb = gk_bpe_learned_token(l, l->right[i], &len);
        size_t lb = byte_level(tb, len, key);
        if (n + la + lb + 3 > cap) {
            char *g = realloc(m, cap = (n + la + lb + 3) * 2);
            if (!(oom = !g)) m = g;
        }
        if (!oom) n += (size_t)sprintf(m + n, "%s %s\n", a, key);
    }
    free(key), free(a);
    int rc = oom ? gk_errf(e, GK_ENOMEM, "out of memory writing the vocabulary")
                 : add_specials(enc, l->n_tokens, sp, e);
    if (!rc && !(*encoder = json_dumps(enc, JSON_PRESERVE_ORDER | JSON_COMPACT)))
        rc = gk_errf(e, GK_ENOMEM, "out of memory writing the vocabulary");
    json_decref(enc);
    if (rc) free(m);
    else *merges = m;
    return rc;
}

/* 0 when dir may be made: absent, or an empty directory (replaced); else the error. */
static int dir_free(const char *dir, gk_err *e)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return errno == ENOENT ? 0 : gk_errno(e, dir);
    if (!S_ISDIR(st.st_mode) || rmdir(dir) != 0 || mkdir(dir, 0755) != 0)
        return gk_errf(e, GK_EUSAGE, "--vocab-out %s: exists (name a new directory, or an empty "
                       "one)", dir);
    return 0;
}

static int write_file(const char *dir, const char *name, const char *text, size_t n, gk_err *e)
{
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(text, 1, n, f) == n && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int err = errno;
    if (f && fclose(f) != 0 && ok) ok = 0, err = errno;
    errno = err;
    return ok ? 0 : gk_errno(e, path);
}

/* Writes the three files into a temporary directory beside dir and renames it to dir, with the
 * signals that end the tool held meanwhile (a signal then ends it after the rename). */
static int write_dir(const char *dir, const char *const names[3], char *const texts[3],
                     gk_err *e)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", dir);
    sigset_t hold, old;
    sigemptyset(&hold);
    sigaddset(&hold, SIGINT), sigaddset(&hold, SIGTERM), sigaddset(&hold, SIGHUP);
    sigprocmask(SIG_BLOCK, &hold, &old);
    int rc = mkdtemp(tmp) ? 0 : gk_errno(e, tmp);
    for (int i = 0; i < 3 && !rc; i++)
        rc = write_file(tmp, names[i], texts[i], strlen(texts[i]), e);
    if (!rc && chmod(tmp, 0755) != 0) rc = gk_errno(e, tmp);
    if (!rc && rename(tmp, dir) != 0) rc = gk_errno(e, dir);
    if (rc) { /* nothing left */
        char path[4300];
        for (int i = 0; i < 3; i++)
            snprintf(path, sizeof path, "%s/%s", tmp, names[i]), unlink(path);
        rmdir(tmp);
    } else {
        gk_sync_dir_of(dir);
    }
    sigprocmask(SIG_SETMASK, &old, NULL);
    return rc;
}

/* The vocabulary of l checked as every tool reads it (gk_vocab_load_mem), then written. */
static int save(const gk_bpe_learned *l, const specials *sp, int pattern, const char *dir,
                gk_err *e)
{
    char *merges = NULL, *dumped = NULL, *encoder = NULL, *tok = NULL;
    gk_vocab *v = NULL;
    size_t len = 0;
    int rc = vocab_texts(l, sp, pattern, &dumped, &merges, e);
    if (!rc) rc = gk_vocab_load_mem(&v, dumped, strlen(dumped), merges, strlen(merges),
                                    "the learned vocabulary", e);
    if (!rc) rc = gk_vocab_to_json(v, &encoder, &len, e);
    if (!rc) rc = gk_vocab_hf_json(v, &tok, &len, e);
    static const char *const names[3] = {"encoder.json", "vocab.bpe", "tokenizer.json"};
    char *const texts[3] = {encoder, merges, tok};
    if (!rc) rc = write_dir(dir, names, texts, e);
    free(dumped), free(merges), free(encoder), free(tok);
    gk_vocab_free(v);
    return rc;
}

static const char *plural(int64_t n) { return n == 1 ? "" : "s"; }

/* The counts' summary lines. */
static void counted(const gk_bpe_counter *c, const tk_count_stats *st)
{
    uint64_t pd, po;
    gk_bpe_counter_pruned(c, &pd, &po);
    if (st->replaced)
        gk_warn("replaced %lld invalid UTF-8 sequence%s with U+FFFD, as encoding does (byte-level "
                "BPE learns from the text's bytes after that)", (long long)st->replaced,
                plural(st->replaced));
    if (pd)
        gk_info("--learn-memory: dropped %llu rare pre-tokens (%llu occurrences) to stay within it",
                (unsigned long long)pd, (unsigned long long)po);
    gk_verbose("%lld documents, %lld bytes: %zu distinct pre-tokens", (long long)st->docs,
               (long long)st->bytes, gk_bpe_counter_distinct(c));
}

int tk_learn(const tk_learn_opts *o, const tk_read_opts *ro, gk_err *e)
{
    specials sp = {o->specials, o->nspecials};
    int64_t least = 258 + o->nspecials;
    if (o->vocab_size < least)
        return gk_errf(e, GK_EUSAGE, "--learn %lld: the vocabulary needs at least %lld tokens (the "
                       "256 bytes, a merge and %d special token%s)", (long long)o->vocab_size,
                       (long long)least, 1 + o->nspecials, o->nspecials ? "s" : "");
    double t0 = gk_now();
    tk_counting *k = NULL;
    tk_count_stats st = {0};
    tk_read_stats rs = {0};
    const gk_bpe_counter *c = NULL;
    int rc = dir_free(o->out_dir, e);
    if (!rc) rc = tk_counting_new(&k, o->threads, o->pattern, o->memory, o->max_docs, e);
    tk_consumer cons = k ? tk_counting_consumer(k) : (tk_consumer){0};
    if (!rc) rc = tk_read_all(ro, &cons, &rs, e);
    if (!rc) rc = tk_counting_finish(k, &c, &st, e);
    if (!rc && !gk_bpe_counter_distinct(c))
        rc = gk_errf(e, GK_EFORMAT, "no text to learn from (%lld document%s, %lld bytes)",
                     (long long)st.docs, plural(st.docs), (long long)st.bytes);
    gk_bpe_learned l = {0};
    merging m = {.t0 = gk_now()};
    if (!rc) {
        counted(c, &st);
        gk_progress_start(&m.bar, "learning", 0);
        rc = gk_bpe_learn(c, (size_t)(o->vocab_size - 1 - o->nspecials), on_merge, &m, o->stop,
                          &l, e);
        gk_progress_end(&m.bar);
    }
    size_t want = (size_t)(o->vocab_size - 1 - o->nspecials);
    if (!rc && l.n_tokens < want)
        gk_warn("the text allows %zu merges only: a vocabulary of %zu tokens, not %lld (more text, "
                "or a smaller --learn)", l.n_merges, l.n_tokens + 1 + (size_t)o->nspecials,
                (long long)o->vocab_size);
    if (!rc) rc = save(&l, &sp, o->pattern, o->out_dir, e);
    if (!rc)
        gk_info("%zu merges learned from %lld document%s, %lld bytes, in %.2f s: %s", l.n_merges,
                (long long)st.docs, plural(st.docs), (long long)st.bytes, gk_now() - t0,
                o->out_dir);
    gk_bpe_learned_free(&l);
    tk_counting_free(k);
    return rc;
}
