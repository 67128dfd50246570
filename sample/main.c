/* main.c: gpt-sample: text from a checkpoint. Parses options, loads the model and vocabulary,
 * encodes the prompt, runs the generation loop (generate.h) printing the samples
 * (common/text/sampleout.h) and times the prompt and the generation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/env.h"
#include "common/io/readall.h"
#include "common/log.h"
#include "common/mem.h"
#include "common/opt.h"
#include "common/proc.h"
#include "common/progress.h"
#include "common/text/encode_text.h"
#include "common/text/sampleout.h"
#include "common/text/vocab.h"
#include "kernels/device_opt.h"
#include "kernels/infer/generate.h"
#include "kernels/infer/runner.h"

typedef struct options {
    gk_device_args dev; /* --dtype, --device, --attention */
    const char *model, *prompt, *prompt_file, *vocab;
    int64_t n_new, num_samples, top_k, seed;
    double temperature, top_p;
    int stop_at_eot, ids, quiet, verbose;
} options;

static const char usage[] =
    "gpt-sample [-m CKPT] [-n TOKENS] [-p PROMPT | -f FILE] [--num-samples K] [-t TEMP] [-k TOPK]\n"
    "                  [--top-p P] [--seed S] [--stop-at-eot] [--ids]\n"
    "                  [--dtype float32|bfloat16|float16|int8] [--device NAME] [--attention PATH]\n"
    "Generates text from a GPT-2 checkpoint, streaming it to stdout.";

static const char footer[] =
    "The model is -m, else $GPT_MODEL, else out/latest.safetensors. "
    "The vocabulary is -V, else the\n"
    "checkpoint's own, else $GPT_VOCAB or the HuggingFace cache. "
    "With no prompt, generation starts\n"
    "from <|endoftext|> (BPE) or a newline (char). Same seed, same output; -t 0 is greedy.\n"
    "Example: gpt-sample -m out/latest.safetensors -p 'ROMEO:' -n 200 -t 0.8 -k 200\n";

static int parse(options *o, int argc, char **argv, int *first, gk_err *e)
{
    const gk_opt tab[] = {
        {'m', "model", GK_OPT_STR, &o->model, "CKPT", "checkpoint (.safetensors)", 0, 0},
        {'n', "tokens", GK_OPT_INT, &o->n_new, "N", "tokens to generate per sample (default 256)",
         0, 1e9},
        {'p', "prompt", GK_OPT_STR, &o->prompt, "TEXT", "start from TEXT", 0, 0},
        {'f', "prompt-file", GK_OPT_STR, &o->prompt_file, "FILE",
         "start from the text of FILE (- reads standard input)", 0, 0},
        {0, "num-samples", GK_OPT_INT, &o->num_samples, "K",
         "K samples, generated as one batch (default 1)", 1, 1024},
        {'t', "temperature", GK_OPT_DOUBLE, &o->temperature, "T",
         "sampling temperature; 0 = greedy (default 0.8)", 0, 1e6},
        {'k', "top-k", GK_OPT_INT, &o->top_k, "K",
         "sample among the K most likely tokens; 0 = all (default 200)", 0, 1e9},
        {0, "top-p", GK_OPT_DOUBLE, &o->top_p, "P",
         "nucleus sampling: the most likely tokens holding P (default 1)", 1e-9, 1},
        {0, "seed", GK_OPT_INT, &o->seed, "S", "random seed (default 1337)", 0, 9.2e18},
        {0, "stop-at-eot", GK_OPT_FLAG, &o->stop_at_eot, NULL, "end a sample at <|endoftext|>", 0,
         0},
        {0, "ids", GK_OPT_FLAG, &o->ids, NULL, "print token ids, space-separated, instead of text",
         0, 0},
        {'V', "vocab", GK_OPT_STR, &o->vocab, "DIR|FILE",
         "vocabulary (instead of the checkpoint's)", 0, 0},
        GK_DEVICE_OPTS(o->dev,
                       "weight matrices in memory: float32, bfloat16, float16 or int8 (fp32, bf16, "
                       "fp16; float16 and int8, llama.cpp's Q8_0, on the CPU backends only: cpu "
                       "and ref, not cuda); 16 bits halve the bytes read per token, int8 nearly "
                       "quarters them (default: bfloat16 on cuda, else float32)"),
        {'q', "quiet", GK_OPT_FLAG, &o->quiet, NULL, "no messages but errors", 0, 0},
        {'v', "verbose", GK_OPT_COUNT, &o->verbose, NULL, "more messages", 0, 0},
        {0, NULL, 0, NULL, NULL, NULL, 0, 0},
    };
    return gk_opt_parse_main(tab, "gpt-sample", usage, footer, argc, argv, first, e);
}

/* The largest prompt file: far more text than any context holds */
#define PROMPT_MAX ((size_t)1 << 30)

/* The whole of path ("-": standard input, which must not have been closed at start). */
static int read_prompt(const char *path, char **buf, size_t *len, gk_err *e)
{
    if (strcmp(path, "-"))
        return gk_read_file(path, PROMPT_MAX, buf, len, e);
    if (gk_std_was_closed(0)) /* reopened on /dev/null: not a prompt */
        return gk_errf(e, GK_EIO, "-f -: standard input is closed (give -p, or redirect it)");
    return gk_read_all(stdin, "standard input", PROMPT_MAX, buf, len, e);
}

/* The prompt's ids (a literal <|endoftext|> in it is that token); none given: the start token
 * (*hidden = 1). */
static int encode_prompt(const options *o, const gk_vocab *v, int **ids, int64_t *n, int *hidden,
                         gk_err *e)
{
    char *text = NULL;
    size_t len = 0, nu = 0, cap = 0, bad = 0;
    uint32_t *u = NULL;
    int rc = 0;
    if (o->prompt_file)
        rc = read_prompt(o->prompt_file, &text, &len, e);
    else if (o->prompt)
        len = strlen(o->prompt);
    *hidden = !len;
    if (rc == 0 && !len) {
        rc = (u = malloc(sizeof *u)) ? gk_text_start_token(v, u, e)
                                     : gk_errf(e, GK_ENOMEM, "out of memory");
        if (rc == GK_EFORMAT)
            rc = gk_errf(e, GK_EFORMAT, "no prompt, and the vocabulary has no <|endoftext|> or "
                         "newline to start from: give one with -p");
        nu = rc == 0;
    } else if (rc == 0) {
        rc = gk_text_encode(v, text ? text : o->prompt, len, GK_ENCODE_SPECIAL, &u, &nu, &cap, &bad,
                            e);
    }
    if (bad && !rc)
        gk_warn("%s: replaced %zu invalid UTF-8 sequence%s with U+FFFD",
                !o->prompt_file ? "the prompt" : strcmp(o->prompt_file, "-") ? o->prompt_file
                : "standard input", bad, bad == 1 ? "" : "s");
    if (rc == 0 && !nu) rc = gk_errf(e, GK_EUSAGE, "the prompt encodes to no tokens");
    if (rc == 0 && !(*ids = malloc(sizeof(int) * nu))) rc = gk_errf(e, GK_ENOMEM, "out of memory");
    for (size_t i = 0; rc == 0 && i < nu; i++) (*ids)[i] = (int)u[i];
    *n = (int64_t)nu;
    free(u);
    free(text);
    return rc;
}

/* The generation's hooks: tokens to the printer, the clock read when the prompt is done. */
typedef struct gen_watch {
    gk_sampleout *out;
    double prompt_end;
    int64_t *made;     /* tokens generated so far, over all samples */
} gen_watch;

static void on_prompt_done(void *ctx, int64_t tokens)
{
    (void)tokens;
    ((gen_watch *)ctx)->prompt_end = gk_now();
}

static int on_token(void *ctx, int sample, int tok, gk_err *e)
{
    ++*((gen_watch *)ctx)->made;
    return gk_sampleout_token(((gen_watch *)ctx)->out, sample, tok, e);
}

/* Generates and prints the samples of prompt[0..n); says how long the prompt and the new
 * tokens took. */
static int generate(const options *o, gk_gpt2 *m, const gk_vocab *v, const int *prompt,
                    int64_t n, int hidden, int64_t *made, gk_err *e)
{
    gk_gen_opts go = {o->n_new, (int)o->num_samples, o->stop_at_eot ? gk_vocab_eot(v) : -1,
                      (int)gk_vocab_size(v),
                      {(float)o->temperature, (int)o->top_k, (float)o->top_p, (uint64_t)o->seed}};
    gk_sampleout so;
    gen_watch w = {&so, 0, made};
    gk_gen_hooks hooks = {&w, on_prompt_done, on_token};
    gk_gen_counts st;
    int rc = gk_sampleout_init(&so, v, o->ids, (int)o->num_samples, stdout, "standard output", e);
    if (!rc) rc = gk_sampleout_prompt(&so, prompt, n, hidden, e);
    double t0 = gk_now();
    if (!rc) rc = gk_generate(m, prompt, n, &go, &hooks, &st, e);
    double prompt_secs = w.prompt_end - t0, gen_secs = gk_now() - w.prompt_end;
    if (!rc) rc = gk_sampleout_finish(&so, e);
    gk_sampleout_free(&so);
    if (!rc)
        gk_info("prompt %lld token%s in %.3f s; %lld token%s in %.3f s (%.1f tokens/s)",
                (long long)st.prompt_tokens, st.prompt_tokens == 1 ? "" : "s", prompt_secs,
                (long long)st.new_tokens, st.new_tokens == 1 ? "" : "s", gen_secs,
                gen_secs > 0 ? st.new_tokens / gen_secs : 0.0);
    return rc;
}


static int run(const options *o, const gk_env *env, gk_err *e)
{
    gk_gpt2_runner r = {0};
    int *prompt = NULL, hidden = 0;
    int64_t n = 0;
    int weights;
    int rc = gk_opt_weights(o->dev.dtype, &weights, e); /* a usage error before any file */
    if (!rc) rc = gk_gpt2_runner_open(&r, &o->dev, weights, o->model, o->vocab, 1, env, e);
    if (r.retries) gk_warn("%s: %ld requests retried", r.where, r.retries);
    char what[128];
    /* -v: tests compare stderr */
    if (r.be) gk_verbose("device %s", gk_backend_describe(r.be, what, sizeof what));
    if (r.be) gk_warn_note(r.be->note); /* e.g. why device auto is not cuda */
    if (!rc) rc = encode_prompt(o, r.vocab, &prompt, &n, &hidden, e);
    if (!rc) rc = gk_gpt2_runner_check(&r, (int)o->num_samples, r.cfg.block_size, weights,
                                       "lower --num-samples, or try --dtype bfloat16", e);
    if (rc == GK_ENOMEM && r.mem_check == 1) { /* GPT_MEM_CHECK=warn */
        gk_warn("%s (GPT_MEM_CHECK=warn: going on)", e->msg);
        rc = 0;
    }
    if (!rc) rc = gk_gpt2_runner_load(&r, (int)o->num_samples, r.cfg.block_size, weights, e);
    if (!rc && n > r.cfg.block_size)
        gk_warn("the prompt's %lld tokens are cropped to the last %d (block_size)", (long long)n,
                r.cfg.block_size);
    int64_t made = -1;
    if (!rc) {
        made = 0;
        rc = generate(o, r.model, r.vocab, prompt, n, hidden, &made, e);
    }
    if (rc && made >= 0 && gk_backend_status(r.be, NULL)) { /* a device fault mid-generation */
        char msg[sizeof e->msg];
        snprintf(msg, sizeof msg, "%s", e->msg);
        rc = gk_errf(e, rc, "after %lld generated token%s: %.900s", (long long)made,
                     made == 1 ? "" : "s", msg);
    }
    if (r.be) gk_warn_note(r.be->note); /* e.g. CUDA graphs turned off */
    free(prompt);
    gk_gpt2_runner_close(&r);
    return rc;
}

int main(int argc, char **argv)
{
    gk_env env;
    gk_env_tool_start(&env, "gpt-sample"); /* the environment, read once here */
    options o = {.n_new = 256, .num_samples = 1, .top_k = 200, .seed = 1337, .temperature = 0.8,
                 .top_p = 1.0};
    gk_err e = {0};
    int first;
    int rc = parse(&o, argc, argv, &first, &e);
    if (rc == GK_OPT_HELP || rc == GK_OPT_VERSION) {
        rc = 0; /* printed: only the check that it reached stdout is left */
    } else {
        gk_log_setup("gpt-sample", o.quiet ? GK_LOG_QUIET : GK_LOG_NORMAL + o.verbose);
        if (rc == 0 && first < argc)
            rc = gk_errf(&e, GK_EUSAGE, "unexpected argument '%s'", argv[first]);
        if (rc == 0 && o.prompt && o.prompt_file)
            rc = gk_errf(&e, GK_EUSAGE, "-p and -f: give one prompt");
        if (rc == 0) rc = run(&o, &env, &e);
    }
    if (rc == 0) rc = gk_std_finish(&e); /* text that did not reach stdout (a full disk) fails */
    if (rc) {
        gk_error("%s", e.msg);
        return gk_exit_status(rc);
    }
    return 0;
}
