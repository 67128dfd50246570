/* main.c: gpt-evalppl: perplexity of a checkpoint on shards or text. Parses options, loads the
 * model, turns each input into tokens (input.h) and scores them in sliding windows (score.h);
 * with --hellaswag, multiple-choice accuracy on HellaSwag's JSON Lines (common/io/choice.h,
 * kernels/infer/multichoice.h). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/env.h"
#include "common/log.h"
#include "common/mem.h"
#include "common/opt.h"
#include "common/proc.h"
#include "common/progress.h"
#include "common/s3/s3.h"
#include "common/io/choice.h"
#include "common/text/vocab.h"
#include "evalppl/input.h"
#include "evalppl/score.h"
#include "kernels/device_opt.h"
#include "kernels/infer/multichoice.h"
#include "kernels/infer/runner.h"

typedef struct options {
    gk_device_args dev; /* --dtype, --device, --attention */
    const char *model, *vocab;
    int64_t context, stride, batch;
    int json, per_doc, raw, hellaswag, quiet, verbose;
} options;

static const char usage[] =
    "gpt-evalppl [-m CKPT] [--context N] [--stride S] [--json] [--per-doc] [--raw]\n"
    "                   [--dtype float32|bfloat16|float16|int8] "
    "[--device NAME] [--attention PATH]\n"
    "                   [FILE...]\n"
    "       gpt-evalppl --hellaswag [-m CKPT] [--context N] [--batch R] [--json] [--per-doc]\n"
    "                   [FILE.jsonl...]\n"
    "Perplexity of a GPT-2 checkpoint on token shards or text (stdin when no FILE), or its\n"
    "accuracy on multiple-choice items in HellaSwag's JSON Lines format.";

static const char footer[] =
    "A FILE starting with the shard magic is a shard, else text, encoded with the checkpoint's\n"
    "vocabulary. Windows of N tokens every S tokens; each token is scored once (the first has no\n"
    "context). Prints tokens, mean NLL (nats), perplexity and, for text, bits per byte.\n"
    "--hellaswag: each ending scored after its context, as llm.c does; prints acc (lowest\n"
    "summed NLL) and acc_norm (lowest NLL per token).\n"
    "Example: gpt-tokenize < val.txt | gpt-evalppl -m model.safetensors --stride 512\n";

static int parse(options *o, int argc, char **argv, int *first, gk_err *e)
{
    const gk_opt tab[] = {
        {'m', "model", GK_OPT_STR, &o->model, "CKPT",
         "checkpoint (default $GPT_MODEL, else out/latest.safetensors)", 0, 0},
        {0, "context", GK_OPT_INT, &o->context, "N", "tokens per window (default block_size)", 1,
         1 << 20},
        {0, "stride", GK_OPT_INT, &o->stride, "S", "tokens between window starts (default N)", 1,
         1 << 20},
        {0, "json", GK_OPT_FLAG, &o->json, NULL, "print a JSON object {tokens, nll, ppl[, bpb]}", 0,
         0},
        {0, "per-doc", GK_OPT_FLAG, &o->per_doc, NULL,
         "also a line per document (split at <|endoftext|>), or per item", 0, 0},
        {0, "raw", GK_OPT_FLAG, &o->raw, NULL,
         "inputs are header-less uint16 tokens (nanoGPT .bin)", 0, 0},
        {0, "hellaswag", GK_OPT_FLAG, &o->hellaswag, NULL,
         "inputs are multiple-choice items (HellaSwag's .jsonl): print accuracy", 0, 0},
        {0, "batch", GK_OPT_INT, &o->batch, "R",
         "with --hellaswag: rows (endings) per forward (default 4, an item; 64 on a GPU)", 1, 4096},
        {'V', "vocab", GK_OPT_STR, &o->vocab, "DIR|FILE",
         "vocabulary (instead of the checkpoint's)", 0, 0},
        GK_DEVICE_OPTS(o->dev,
                       "weight matrices in memory: float32, bfloat16, float16 or int8 (fp32, bf16, "
                       "fp16; float16 and int8, llama.cpp's Q8_0, on the CPU backends only: cpu "
                       "and ref, not cuda; default: bfloat16 on cuda, else float32)"),
        {'q', "quiet", GK_OPT_FLAG, &o->quiet, NULL, "no messages but errors", 0, 0},
        {'v', "verbose", GK_OPT_COUNT, &o->verbose, NULL, "more messages", 0, 0},
        {0, NULL, 0, NULL, NULL, NULL, 0, 0},
    };
    return gk_opt_parse_main(tab, "gpt-evalppl", usage, footer, argc, argv, first, e);
}

/* Prints j on one line and frees it. */
static const char *plural(size_t n) { return n == 1 ? "" : "s"; }

static void put_json(json_t *j)
{
    char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
    if (s) puts(s);
    free(s);
    json_decref(j);
}

static void print_result(const options *o, const char *file, long doc, int64_t tokens, double nll,
                         int64_t bytes)
{
    double mean = tokens ? nll / tokens : 0.0;
    if (o->json) {
        json_t *j = json_object();
        if (file) {
            json_object_set_new(j, "file", json_string(file));
            json_object_set_new(j, "doc", json_integer(doc));
        }
        json_object_set_new(j, "tokens", json_integer(tokens));
        json_object_set_new(j, "nll", json_real(mean));
        json_object_set_new(j, "ppl", json_real(exp(mean)));
        if (bytes > 0) json_object_set_new(j, "bpb", json_real(nll / log(2.0) / (double)bytes));
        put_json(j);
        return;
    }
    if (file) printf("%s doc %ld: ", file, doc);
    printf("tokens %lld  nll %.6f  ppl %.4f", (long long)tokens, mean, exp(mean));
    if (bytes > 0) printf("  bpb %.6f", nll / log(2.0) / (double)bytes);
    putchar('\n');
}

/* per-document accounting: a document is an <|endoftext|> and the tokens up to the next one */
typedef struct doc_acc {
    const options *o;
    const ep_stream *s;
    int64_t eot;
    long doc;
    int64_t tokens;
    double nll;
} doc_acc;

static void doc_flush(doc_acc *a)
{
    if (a->tokens) print_result(a->o, a->s->name, a->doc, a->tokens, a->nll, 0);
    a->doc++;
    a->tokens = 0;
    a->nll = 0;
}

static void doc_token(void *ctx, size_t pos, double nll)
{
    doc_acc *a = ctx;
    if ((int64_t)a->s->ids[pos] == a->eot) doc_flush(a);
    a->tokens++;
    a->nll += nll;
}

/* Opens the backend, the checkpoint and its vocabulary (need_vocab: or fails); *context is
 * --context, else the model's block_size. */
static int open_model(const options *o, const gk_env *env, gk_gpt2_runner *r, int *weights,
                      int *context, int need_vocab, gk_err *e)
{
    *weights = GK_WEIGHTS_F32;
    int rc = gk_opt_weights(o->dev.dtype, weights, e); /* a usage error before any file */
    if (!rc) rc = gk_gpt2_runner_open(r, &o->dev, *weights, o->model, o->vocab, need_vocab, env, e);
    if (r->retries) gk_warn("%s: %ld requests retried", r->where, r->retries);
    char what[128];
    /* -v: tests compare stderr */
    if (r->be) gk_verbose("device %s", gk_backend_describe(r->be, what, sizeof what));
    if (r->be) gk_warn_note(r->be->note); /* e.g. why device auto is not cuda */
    *context = o->context ? (int)o->context : 0;
    if (!rc) {
        if (!*context) *context = r->cfg.block_size;
        if (*context > r->cfg.block_size)
            rc = gk_errf(e, GK_EUSAGE, "--context %d: the model's block_size is %d", *context,
                         r->cfg.block_size);
    }
    return rc;
}

/* The memory check, then the model for batches up to max_B x max_T. */
static int load_model(gk_gpt2_runner *r, int max_B, int max_T, int weights, gk_err *e)
{
    int rc = gk_gpt2_runner_check(r, max_B, max_T, weights,
                                  "lower --context, or try --dtype bfloat16", e);
    if (rc == GK_ENOMEM && r->mem_check == 1) { /* GPT_MEM_CHECK=warn */
        gk_warn("%s (GPT_MEM_CHECK=warn: going on)", e->msg);
        rc = 0;
    }
    return rc ? rc : gk_gpt2_runner_load(r, max_B, max_T, weights, e);
}

/* A client for the inputs in a bucket, if any (credentials, region and endpoint from the
 * environment and ~/.aws), handed to input.c. */
static int inputs_s3(char **inputs, int ninputs, gk_s3 **s3, gk_err *e)
{
    gk_s3_conf conf;
    int need = 0, rc = 0;
    for (int i = 0; i < ninputs; i++)
        need |= gk_s3_is_url(inputs[i]);
    if (need && !(rc = gk_s3_conf_discover(&conf, gk_env_getenv, NULL, e)) &&
        !(rc = gk_s3_open(s3, &conf, e)))
        ep_input_s3(*s3);
    return rc;
}

static int run(const options *o, const gk_env *env, char **inputs, int ninputs, gk_err *e)
{
    gk_gpt2_runner r = {0};
    ep_scorer *sc = NULL;
    int weights, context;
    gk_s3 *s3 = NULL;
    int rc = open_model(o, env, &r, &weights, &context, 0, e); /* shards need no vocabulary */
    if (!rc)
        rc = inputs_s3(inputs, ninputs, &s3, e);
    const gk_vocab *v = r.vocab;
    int stride = o->stride ? (int)o->stride : context;
    /* a bad header stops the run before the model is made */
    for (int i = 0; rc == 0 && i < ninputs; i++)
        rc = ep_precheck(inputs[i], v, o->raw, (uint32_t)r.cfg.vocab_size, e);
    if (!rc) rc = load_model(&r, 1, context, weights, e);
    if (!rc) rc = ep_scorer_create(&sc, r.model, context, stride, e);
    int64_t tokens = 0, bytes = 0;
    int all_text = 1;
    double nll = 0, t0 = gk_now();
    for (int i = 0; rc == 0 && i < ninputs; i++) {
        ep_stream s;
        rc = ep_load(&s, inputs[i], v, o->raw, (uint32_t)r.cfg.vocab_size, e);
        doc_acc acc = {o, &s, v ? gk_vocab_eot(v) : -1, 1, 0, 0};
        if (!rc) {
            rc = ep_score(sc, s.ids, s.n, o->per_doc ? doc_token : NULL, &acc, &nll, e);
            if (o->per_doc) doc_flush(&acc);
            tokens += s.n > 1 ? (int64_t)s.n - 1 : 0;
            if (s.bytes < 0) all_text = 0;
            else bytes += s.bytes;
            gk_verbose("%s: %zu token%s", s.name, s.n, plural(s.n));
        }
        ep_stream_free(&s);
    }
    double secs = gk_now() - t0;
    if (!rc && !tokens)
        rc = gk_errf(e, GK_EFORMAT,
                     "nothing to score: the input%s hold%s fewer than 2 tokens",
                     ninputs > 1 ? "s" : "", ninputs > 1 ? "" : "s");
    if (!rc) {
        print_result(o, NULL, 0, tokens, nll, all_text ? bytes : 0);
        rc = gk_std_finish(e); /* before the summary: a result lost is a failure */
    }
    if (!rc) {
        gk_info("%lld token%s in %.2f s (%.0f tokens/s), windows of %d every %d", (long long)tokens,
                plural((size_t)tokens), secs, tokens / (secs > 1e-9 ? secs : 1e-9), context,
                stride);
    }
    ep_scorer_free(sc);
    gk_gpt2_runner_close(&r);
    ep_input_s3(NULL);
    gk_s3_close(s3);
    return rc;
}

/* --per-doc with --hellaswag: one line per item */
static void print_item(const options *o, const gk_choice_set *s, const gk_choice_item *it,
                       const gk_choice_result *res)
{
    if (o->json) {
        json_t *j = json_pack("{s:s, s:I, s:i, s:i, s:i}", "file", s->name, "line",
                              (json_int_t)it->line, "label", it->label, "pred", res->pred,
                              "pred_norm", res->pred_norm);
        json_t *nll = json_array(), *tokens = json_array();
        for (int k = 0; k < it->n_endings; k++) {
            json_array_append_new(nll, json_real(res->nll[k]));
            json_array_append_new(tokens, json_integer(res->tokens[k]));
        }
        json_object_set_new(j, "nll", nll);
        json_object_set_new(j, "tokens", tokens);
        put_json(j);
        return;
    }
    printf("%s:%ld: label %d  pred %d  pred_norm %d\n", s->name, it->line, it->label, res->pred,
           res->pred_norm);
}

static void print_accuracy(const options *o, size_t items, size_t right, size_t right_norm)
{
    double acc = (double)right / (double)items, acc_norm = (double)right_norm / (double)items;
    if (o->json)
        put_json(json_pack("{s:I, s:f, s:f}", "items", (json_int_t)items, "acc", acc, "acc_norm",
                           acc_norm));
    else
        printf("items %zu  acc %.4f  acc_norm %.4f\n", items, acc, acc_norm);
}

typedef struct tally {
    size_t items, done, right, right_norm;
    gk_progress bar;
} tally;

/* Scores set's items in chunks (rows packed into forwards of `rows`), printing per item with
 * --per-doc. */
static int score_set(const options *o, gk_gpt2 *m, const gk_choice_set *set, int context,
                     int rows, tally *t, gk_err *e)
{
    enum { CHUNK = 64 };
    gk_choice_result res[CHUNK];
    int rc = 0;
    for (size_t i0 = 0; !rc && i0 < set->n; i0 += CHUNK) {
        size_t n = set->n - i0 < CHUNK ? set->n - i0 : CHUNK;
        rc = gk_choice_score_many(m, set->items + i0, n, context, rows, res, e);
        gk_progress_clear(&t->bar);
        for (size_t i = 0; !rc && i < n; i++) {
            const gk_choice_item *it = &set->items[i0 + i];
            t->right += res[i].pred == it->label;
            t->right_norm += res[i].pred_norm == it->label;
            if (o->per_doc) print_item(o, set, it, &res[i]);
        }
        t->done += n;
        char note[64];
        snprintf(note, sizeof note, "%zu/%zu item%s", t->done, t->items, plural(t->items));
        gk_progress_line(&t->bar, (double)t->done / (double)t->items, note);
    }
    return rc;
}

/* Rows a forward without --batch: 4 (one item) where device memory is host memory (props: cpu,
 * ref, cuda-emu), the CPU's best; on a GPU 64 (16 items: the fastest of 4, 16 and 64 rows in
 * tests/bench/gpu-results.md), halved while they would not fit. */
static int default_rows(gk_gpt2_runner *r, int max_T, int weights)
{
    if (r->be->props.host_memory) return 4;
    gk_err quiet = {0};
    int rows = 64;
    while (rows > 4 && gk_gpt2_runner_check(r, rows, max_T, weights, "", &quiet) == GK_ENOMEM)
        rows /= 2;
    return rows;
}

/* Reads every input whole (all checked before the model is made), then scores them. */
static int run_choice(const options *o, const gk_env *env, char **inputs, int ninputs, gk_err *e)
{
    gk_gpt2_runner r = {0};
    int weights, context, max_T = 0, rows = (int)o->batch;
    tally t = {0};
    int rc = open_model(o, env, &r, &weights, &context, 1, e);
    gk_choice_set *sets = calloc((size_t)ninputs, sizeof *sets);
    if (!rc && !sets) rc = gk_errf(e, GK_ENOMEM, "out of memory");
    for (int i = 0; !rc && i < ninputs; i++) {
        rc = gk_choice_load(&sets[i], inputs[i], r.vocab, (uint32_t)r.cfg.vocab_size, context, e);
        t.items += sets[i].n;
        if (sets[i].max_row - 1 > max_T) max_T = sets[i].max_row - 1;
    }
    if (!rc && !t.items) rc = gk_errf(e, GK_EFORMAT, "nothing to score: no items in the input%s",
                                      ninputs > 1 ? "s" : "");
    if (!rc && !rows) rows = default_rows(&r, max_T < context ? max_T : context, weights);
    if (!rc) rc = load_model(&r, rows, max_T < context ? max_T : context, weights, e);
    gk_progress_start(&t.bar, "hellaswag", (int64_t)t.items);
    double t0 = gk_now();
    for (int i = 0; !rc && i < ninputs; i++)
        rc = score_set(o, r.model, &sets[i], max_T < context ? max_T : context, rows, &t, e);
    gk_progress_end(&t.bar);
    if (!rc) {
        print_accuracy(o, t.items, t.right, t.right_norm);
        rc = gk_std_finish(e);
    }
    if (!rc)
        gk_info("%zu item%s in %.2f s (%d row%s a forward)", t.items, plural(t.items),
                gk_now() - t0, rows, plural((size_t)rows));
    for (int i = 0; sets && i < ninputs; i++) gk_choice_free(&sets[i]);
    free(sets);
    gk_gpt2_runner_close(&r);
    return rc;
}

int main(int argc, char **argv)
{
    gk_env env;
    gk_env_tool_start(&env, "gpt-evalppl"); /* the environment, read once here */
    options o = {0};
    gk_err e = {0};
    int first;
    int rc = parse(&o, argc, argv, &first, &e);
    if (rc == GK_OPT_HELP || rc == GK_OPT_VERSION) {
        rc = 0; /* printed: only the check that it reached stdout is left */
    } else {
        gk_log_setup("gpt-evalppl", o.quiet ? GK_LOG_QUIET : GK_LOG_NORMAL + o.verbose);
        if (rc == 0 && o.stride && o.context && o.stride > o.context)
            rc = gk_errf(&e, GK_EUSAGE, "--stride %lld exceeds --context %lld", (long long)o.stride,
                         (long long)o.context);
        if (rc == 0 && o.batch && !o.hellaswag)
            rc = gk_errf(&e, GK_EUSAGE, "--batch applies to --hellaswag only");
        if (rc == 0 && o.hellaswag && (o.raw || o.stride))
            rc = gk_errf(&e, GK_EUSAGE, "--hellaswag: items are scored whole; --%s does not apply",
                         o.raw ? "raw" : "stride");
        static char *stdin_only[] = {"-"};
        char **in = first < argc ? argv + first : stdin_only;
        int nin = first < argc ? argc - first : 1;
        if (rc == 0)
            rc = o.hellaswag ? run_choice(&o, &env, in, nin, &e) : run(&o, &env, in, nin, &e);
    }
    /* a result that did not reach stdout (a full disk) fails */
    if (rc == 0) rc = gk_std_finish(&e);
    if (rc) {
        gk_error("%s", e.msg);
        return gk_exit_status(rc);
    }
    return 0;
}
