/* test_sample_gen.c: gpt-sample's generation loop (kernels/infer/generate.h) and sample printer
 * (common/text/sampleout.h). The loop's tokens equal an independent reference that samples
 * each sequence alone from a full forward pass of a training model with the same weights
 * (no KV cache; the window of the last block_size tokens), past block_size, with a cropped
 * prompt, per-sample draws and an end-of-text token; the hooks come in order and a hook's error
 * stops the loop. The printer's output is checked byte for byte against hand-written text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/text/sampleout.h"
#include "kernels/cpu/cpu.h"
#include "kernels/infer/generate.h"
#include "test.h"

enum { BS = 8, V = 40, MAXK = 3, MAXN = 64 };
static const gk_gpt2_config cfg = {2, 2, 32, BS, V, 1, 0.0f};

/* What the hooks saw. */
typedef struct seen {
    int toks[MAXK][MAXN], n[MAXK];
    int64_t prompt_calls, prompt_tokens, tokens_before_prompt, total;
    int fail_at; /* hand back GK_EIO at this token (counted from 1); 0: never */
    int order_ok; /* tokens come step by step: sample b's i-th token in step i */
    int last_sample, step;
} seen;

static void on_prompt(void *ctx, int64_t tokens)
{
    seen *s = ctx;
    s->prompt_calls++;
    s->prompt_tokens = tokens;
}

static int on_token(void *ctx, int sample, int tok, gk_err *e)
{
    seen *s = ctx;
    if (!s->prompt_calls) s->tokens_before_prompt++;
    if (sample <= s->last_sample) s->step++; /* a new step: the samples start over */
    s->last_sample = sample;
    if (s->n[sample] != s->step) s->order_ok = 0;
    if (s->n[sample] < MAXN) s->toks[sample][s->n[sample]++] = tok;
    if (++s->total == s->fail_at) return gk_errf(e, GK_EIO, "hook failed at %d", s->fail_at);
    return 0;
}

/* The reference: sample b alone, each step a full forward over the last block_size tokens of
 * its sequence, its draw from the same counter-based sampler. out[0..*n) its tokens up to (not
 * including) eot. */
static void reference(gk_gpt2 *ref, const int *prompt, int np, const gk_gen_opts *o, int b,
                      int *out, int *n)
{
    gk_err e = {0};
    int seq[MAXN + 32], len = np;
    float logits[V];
    gk_sampler *smp = NULL;
    int nv = o->n_vocab > 0 && o->n_vocab < V ? o->n_vocab : V;
    CHECK_OK(gk_sampler_create(&smp, &o->sampling, nv, &e), &e);
    memcpy(seq, prompt, sizeof(int) * np);
    *n = 0;
    for (int step = 0; step < o->n_new; step++) {
        int ctx = len < BS ? len : BS;
        CHECK_OK(gk_gpt2_forward(ref, seq + len - ctx, NULL, 1, ctx, NULL, &e), &e);
        CHECK_OK(gk_gpt2_logits_host(ref, ctx - 1, 1, nv, logits, &e), &e);
        int tok = gk_sample(smp, logits, (uint32_t)b, (uint64_t)step);
        if (tok == o->eot) break;
        seq[len++] = out[(*n)++] = tok;
    }
    gk_sampler_free(smp);
}

/* Runs gk_generate and the reference on the same prompt and options; compares. */
static void compare(gk_gpt2 *m, gk_gpt2 *ref, const int *prompt, int np, const gk_gen_opts *o)
{
    gk_err e = {0};
    seen s = {.order_ok = 1, .last_sample = MAXK, .step = -1};
    gk_gen_hooks h = {&s, on_prompt, on_token};
    gk_gen_counts c;
    CHECK_OK(gk_generate(m, prompt, np, o, &h, &c, &e), &e);
    CHECK(s.prompt_calls == 1 && s.tokens_before_prompt == 0 && s.order_ok);
    CHECKF(s.prompt_tokens == (np < BS ? np : BS) && c.prompt_tokens == s.prompt_tokens,
           "prompt %lld / %lld", (long long)s.prompt_tokens, (long long)c.prompt_tokens);
    int steps = 0;
    for (int b = 0; b < o->num_samples; b++) {
        int want[MAXN], nw;
        reference(ref, prompt, np, o, b, want, &nw);
        CHECKF(s.n[b] == nw, "sample %d: %d tokens, reference %d", b, s.n[b], nw);
        for (int i = 0; i < nw && i < s.n[b]; i++)
            CHECKF(s.toks[b][i] == want[i], "sample %d token %d: %d vs %d", b, i, s.toks[b][i],
                   want[i]);
        int ran = nw < o->n_new ? nw + 1 : nw; /* the step that drew eot ran too */
        if (ran > steps) steps = ran;
    }
    CHECKF(c.new_tokens == (int64_t)steps * o->num_samples, "new_tokens %lld, steps %d",
           (long long)c.new_tokens, steps);
}

static void make_models(gk_backend **be, gk_gpt2 **m, gk_gpt2 **ref)
{
    gk_err e = {0};
    CHECK_OK(gk_cpu_create(be, 2, &e), &e);
    CHECK_OK(gk_gpt2_create_ex(m, &cfg, *be, MAXK, BS, GK_GPT2_INFERENCE, &e), &e);
    CHECK_OK(gk_gpt2_init(*m, 5, &e), &e);
    CHECK_OK(gk_gpt2_create(ref, &cfg, *be, 1, BS, &e), &e);
    CHECK_OK(gk_gpt2_init(*ref, 5, &e), &e);
}

static void test_generate_equals_reference(void)
{
    gk_backend *be = NULL;
    gk_gpt2 *m = NULL, *ref = NULL;
    make_models(&be, &m, &ref);
    int prompt[11] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5};
    // greedy, one sample, a prompt cropped to block_size, 20 steps past it
    gk_gen_opts o = {20, 1, -1, 0, {0.0f, 0, 1.0f, 1}};
    compare(m, ref, prompt, 11, &o);
    // three samples drawn at temperature 1 from the first 37 tokens, short prompt, past BS
    o = (gk_gen_opts){20, 3, -1, 37, {1.0f, 0, 1.0f, 9}};
    compare(m, ref, prompt, 3, &o);
    // again with an end-of-text token: the one sample 1 drew at step 4
    seen s = {.order_ok = 1, .last_sample = MAXK, .step = -1};
    gk_gen_hooks h = {&s, NULL, on_token};
    gk_err e = {0};
    CHECK_OK(gk_generate(m, prompt, 3, &o, &h, NULL, &e), &e);
    o.eot = s.toks[1][4];
    compare(m, ref, prompt, 3, &o);
    // top-k and top-p, and no new tokens at all
    o = (gk_gen_opts){12, 2, -1, 0, {0.7f, 5, 0.9f, 3}};
    compare(m, ref, prompt, 2, &o);
    o.n_new = 0;
    compare(m, ref, prompt, 2, &o);
    gk_gpt2_free(ref);
    gk_gpt2_free(m);
    gk_backend_free(be);
}

static void test_hook_error_stops(void)
{
    gk_backend *be = NULL;
    gk_gpt2 *m = NULL, *ref = NULL;
    make_models(&be, &m, &ref);
    int prompt[2] = {7, 8};
    gk_gen_opts o = {10, 3, -1, 0, {1.0f, 0, 1.0f, 2}};
    seen s = {.order_ok = 1, .last_sample = MAXK, .step = -1, .fail_at = 5};
    gk_gen_hooks h = {&s, on_prompt, on_token};
    gk_err e = {0};
    CHECK(gk_generate(m, prompt, 2, &o, &h, NULL, &e) == GK_EIO);
    CHECKF(strcmp(e.msg, "hook failed at 5") == 0, "%s", e.msg);
    CHECKF(s.total == 5, "%lld tokens after the error", (long long)s.total);
    gk_gpt2_free(ref);
    gk_gpt2_free(m);
    gk_backend_free(be);
}

/* Prints through a printer into a memory stream; returns the text (caller frees). */
static char *print_samples(const gk_vocab *v, int ids, int K, const int *prompt, int np,
                           int hidden, const int (*toks)[2], int ntoks)
{
    gk_err e = {0};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    gk_sampleout so;
    CHECK_OK(gk_sampleout_init(&so, v, ids, K, f, "memory", &e), &e);
    CHECK_OK(gk_sampleout_prompt(&so, prompt, np, hidden, &e), &e);
    for (int i = 0; i < ntoks; i++)
        CHECK_OK(gk_sampleout_token(&so, toks[i][0], toks[i][1], &e), &e);
    CHECK_OK(gk_sampleout_finish(&so, &e), &e);
    gk_sampleout_free(&so);
    fclose(f);
    return buf;
}

/* A byte-level vocabulary: id b is the single byte b (keys in GPT-2's byte alphabet:
 * printable Latin-1 bytes stand for themselves, the others for U+0100 on), 256 end-of-text. */
static gk_vocab *byte_vocab(gk_err *e)
{
    char json[256 * 16 + 64];
    size_t n = 0;
    int other = 0;
    json[n++] = '{';
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
        int cp = printable ? b : 256 + other++;
        n += (size_t)snprintf(json + n, sizeof json - n, "\"\\u%04x\": %d, ", cp, b);
    }
    n += (size_t)snprintf(json + n, sizeof json - n, "\"<|endoftext|>\": 256}");
    gk_vocab *v = NULL;
    CHECK_OK(gk_vocab_load_mem(&v, json, n, NULL, 0, "test", e), e);
    return v;
}

static void test_sampleout(void)
{
    gk_err e = {0};
    gk_vocab *v = byte_vocab(&e);
    if (!v) return;
    enum { A = 'a', B = 'b', C3 = 0xC3, A9 = 0xA9, EOT = 256 }; /* 0xC3 0xA9: U+00E9 */
    int prompt[3] = {EOT, A, C3};
    const int toks[][2] = {{0, A9}, {1, B}, {2, A}, {0, B}, {1, C3}, {0, C3}};
    char *t = print_samples(v, 0, 3, prompt, 3, 1, toks, 6);
    // sample 0: a, e-acute, b, then a 0xC3 never completed (U+FFFD); sample 1: a, 0xC3 broken
    // by b (U+FFFD), b, 0xC3 at the end; sample 2: a, 0xC3 broken by a, a
    CHECKF(t && strcmp(t, "a\xc3\xa9" "b\xef\xbf\xbd\n---\na\xef\xbf\xbd" "b\xef\xbf\xbd\n---\n"
                          "a\xef\xbf\xbd" "a\n") == 0, "text [%s]", t);
    free(t);
    t = print_samples(v, 1, 3, prompt, 3, 1, toks, 6);
    CHECKF(t && strcmp(t, "97 195 169 98 195\n---\n97 195 98 195\n---\n97 195 97\n") == 0,
           "ids [%s]", t);
    free(t);
    // one sample, nothing hidden, no tokens
    t = print_samples(v, 1, 1, prompt, 3, 0, toks, 0);
    CHECKF(t && strcmp(t, "256 97 195\n") == 0, "ids [%s]", t);
    free(t);
    gk_vocab_free(v);
}

int main(void)
{
    RUN(test_generate_equals_reference);
    RUN(test_hook_error_stops);
    RUN(test_sampleout);
    return TEST_END();
}
