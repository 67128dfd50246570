/* main.c: gpt-tokenize: text, files, archives, JSON Lines or Parquet in, token shards out; -d
 * decodes back.
 * Parses options, resolves the vocabulary and wires reader -> encoder -> shard outputs. */
#include <errno.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/env.h"
#include "common/io/outfile.h"
#include "common/log.h"
#include "common/mem.h"
#include "common/opt.h"
#include "common/proc.h"
#include "common/progress.h"
#include "common/s3/s3.h"
#include "common/text/vocab.h"
#include "collect.h"
#include "decode.h"
#include "encode.h"
#include "inputs.h"
#include "learn.h"
#include "output.h"
#include "run.h"
#include "stage.h"

typedef struct options {
    const char *output, *vocab, *vocab_out, *doc_sep, *val_output, *field, *column, *pattern;
    int decode, char_level, allow_special, quiet, verbose, skip_bad;
    int64_t threads, shard_tokens, max_docs, max_tokens, val_docs, val_tokens, max_line;
    int64_t learn, learn_memory;
    double val_fraction;
    const char *specials[TK_LEARN_SPECIALS]; /* --special, after <|endoftext|> */
    int nspecials;
} options;

/* --special TOKEN: one more special token for --learn (printable ASCII, no space, not a dup). */
static int add_special(void *ctx, const char *arg, gk_err *e)
{
    options *o = ctx;
    size_t n = strlen(arg);
    for (size_t i = 0; i < n; i++)
        if (arg[i] <= ' ' || arg[i] > '~')
            return gk_errf(e, GK_EUSAGE, "--special '%s': printable ASCII without spaces only",
                           arg);
    if (!n || !strcmp(arg, "<|endoftext|>"))
        return gk_errf(e, GK_EUSAGE, "--special '%s': %s", arg,
                       n ? "always the first special token already" : "empty");
    for (int i = 0; i < o->nspecials; i++)
        if (!strcmp(o->specials[i], arg))
            return gk_errf(e, GK_EUSAGE, "--special '%s' given twice", arg);
    if (o->nspecials == TK_LEARN_SPECIALS)
        return gk_errf(e, GK_EUSAGE, "--special: at most %d", TK_LEARN_SPECIALS);
    o->specials[o->nspecials++] = arg;
    return 0;
}

static const char usage[] =
    "gpt-tokenize [options] [FILE|DIR|'GLOB'|hf://datasets/OWNER/NAME[@REV]/PATH...] > out.bin\n"
    "       gpt-tokenize -d [options] [SHARD...] > out.txt\n"
    "Encodes text into a token shard with GPT-2 BPE or a char-level vocabulary; -d decodes\n"
    "shards back to text. Inputs: files or stdin, plain or compressed (gzip, bzip2, xz, lzma,\n"
    "zstd, lz4), archives (tar, zip, 7z), JSON Lines (one document a line) or a JSON array of\n"
    "objects (one an item), and Parquet (one document a row; compressed or on stdin too),\n"
    "recognised by content; a directory or a quoted glob stands for its files,\n"
    "in sorted order; hf://datasets/... lists a hub dataset's files (PATH may be a glob) and\n"
    "downloads each into the HuggingFace cache before reading it. Every document starts with\n"
    "<|endoftext|>.";

static const char footer[] =
    "The vocabulary comes from -V, else $GPT_VOCAB, else the HuggingFace cache (gpt2).\n"
    "hf:// honours HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE and HF_HOME (or HF_HUB_CACHE).\n"
    "An input is JSON Lines when its first non-blank byte is '{' and its name ends in .jsonl,\n"
    ".ndjson or .json (before a compression suffix such as .zst), or --field is given; a JSON\n"
    "array of objects when it is '[' instead.\n"
    "With --shard-tokens, -o train.bin writes train_000000.bin, train_000001.bin, ...\n"
    "Example: gpt-tokenize -V ../shared/data/gpt2 input.txt -o train.bin --val-fraction 0.1 "
    "--val-output val.bin\n";

static int parse(options *o, int argc, char **argv, int *first, gk_err *e)
{
    gk_opt_call special = {add_special, o};
    const gk_opt tab[] = {
        {'o', "output", GK_OPT_STR, &o->output, "FILE",
         "write the shard to FILE (with --shard-tokens: "
         "PREFIX_000000.bin..., a .bin of FILE dropped)",
         0, 0},
        {'V', "vocab", GK_OPT_STR, &o->vocab, "DIR|FILE",
         "vocabulary: BPE directory, .tiktoken file, or char vocab file", 0, 0},
        {'d', "decode", GK_OPT_FLAG, &o->decode, NULL, "decode shards back to text", 0, 0},
        {0, "char", GK_OPT_FLAG, &o->char_level, NULL,
         "char-level: the vocabulary is the input's sorted characters", 0, 0},
        {0, "vocab-out", GK_OPT_STR, &o->vocab_out, "FILE|DIR",
         "with --char: write the char vocabulary to FILE; with --learn: the directory", 0, 0},
        {0, "learn", GK_OPT_INT, &o->learn, "N",
         "learn a byte-level BPE vocabulary of N tokens (into --vocab-out DIR)", 1, 16777216},
        {0, "pattern", GK_OPT_STR, &o->pattern, "gpt2|gpt4",
         "--learn: the pre-tokenizer's regex, GPT-2's (default) or GPT-4's (cl100k)", 0, 0},
        {0, "special", GK_OPT_CALL, &special, "TOKEN",
         "--learn: a special token after <|endoftext|> (repeatable)", 0, 0},
        {0, "learn-memory", GK_OPT_INT, &o->learn_memory, "BYTES",
         "--learn: the pre-token counts' bound (default: half the memory available)", 1e6,
         1e15},
        {0, "allow-special", GK_OPT_FLAG, &o->allow_special, NULL,
         "encode <|endoftext|> in the text as the special token", 0, 0},
        {0, "doc-sep", GK_OPT_STR, &o->doc_sep, "STR",
         "also start a new document at each STR (removed)", 0, 0},
        {0, "shard-tokens", GK_OPT_INT, &o->shard_tokens, "N",
         "numbered shards of N tokens each (e.g. 100M)", 1, 2147483647.0},
        {0, "val-fraction", GK_OPT_DOUBLE, &o->val_fraction, "F",
         "put the last fraction F of documents into --val-output", 0, 0.999999},
        {0, "val-docs", GK_OPT_INT, &o->val_docs, "N",
         "put the first N documents into --val-output", 1, 9.2e18},
        {0, "val-tokens", GK_OPT_INT, &o->val_tokens, "N",
         "put the first N tokens into --val-output (a document may straddle)", 1, 9.2e18},
        {0, "val-output", GK_OPT_STR, &o->val_output, "FILE",
         "the validation shard (default: beside -o, PREFIX_val.bin)", 0, 0},
        {0, "max-docs", GK_OPT_INT, &o->max_docs, "N", "stop after N documents", 1, 9.2e18},
        {0, "max-tokens", GK_OPT_INT, &o->max_tokens, "N",
         "stop after N tokens (the last document cut)", 1, 9.2e18},
        {0, "column", GK_OPT_STR, &o->column, "NAME",
         "Parquet: the text column (default text, else the only string column)", 0, 0},
        {0, "field", GK_OPT_STR, &o->field, "NAME",
         "JSON Lines and arrays: the text field (default text; a.b reaches into objects)", 0, 0},
        {0, "skip-bad", GK_OPT_FLAG, &o->skip_bad, NULL,
         "JSON Lines and arrays: skip and count bad lines (items) instead of failing", 0, 0},
        {0, "max-line", GK_OPT_INT, &o->max_line, "N",
         "JSON Lines and arrays: the longest line (item) in bytes (default 64M)", 1, 1e12},
        {'j', "threads", GK_OPT_INT, &o->threads, "N", "encoding threads (default: all cores)", 1,
         1024},
        {'q', "quiet", GK_OPT_FLAG, &o->quiet, NULL, "no summary, progress or warnings", 0, 0},
        {'v', "verbose", GK_OPT_COUNT, &o->verbose, NULL, "more messages", 0, 0},
        {0, NULL, 0, NULL, NULL, NULL, 0, 0},
    };
    int rc = gk_opt_parse(tab, argc, argv, first, e);
    if (rc == GK_OPT_HELP)
        gk_opt_help(stdout, usage, tab, footer);
    else if (rc == GK_OPT_VERSION)
        gk_opt_version(stdout, "gpt-tokenize");
    return rc;
}

/* A validation split without --val-output goes beside -o: the output's name with _val before
 * its .bin (train.bin: train_val.bin; a prefix of numbered shards: PREFIX_val.bin). Onto
 * /dev/null it is discarded too; beside another device or a FIFO it is not made (check_options
 * asks for --val-output). buf holds it. */
static void default_val_output(options *o, char *buf, size_t cap)
{
    int vals = o->val_fraction > 0 || o->val_docs > 0 || o->val_tokens > 0;
    if (!vals || o->val_output || !o->output || !strcmp(o->output, "-"))
        return;
    int special = tk_output_special(o->output);
    if (special == TK_OUT_NULL)
        o->val_output = "/dev/null";
    else if (special == TK_OUT_FILE &&
             snprintf(buf, cap, "%.*s_val.bin", (int)tk_output_prefix_len(o->output), o->output) <
                 (int)cap)
        o->val_output = buf;
}

static int check_options(const options *o, gk_err *e)
{
    int vals = (o->val_fraction > 0) + (o->val_docs > 0) + (o->val_tokens > 0);
    if (vals > 1)
        return gk_errf(e, GK_EUSAGE,
                       "--val-fraction, --val-docs and --val-tokens: give one of them");
    const char *val = o->val_docs     ? "--val-docs"
                      : o->val_tokens ? "--val-tokens"
                                      : "--val-fraction";
    if (vals > 0 && !o->val_output && o->output && strcmp(o->output, "-") != 0)
        return gk_errf(e, GK_EUSAGE, "%s with -o %s, a device or FIFO: name the validation shard "
                       "(--val-output FILE; none is made beside a device)", val, o->output);
    if ((vals > 0) != (o->val_output != NULL))
        return gk_errf(e, GK_EUSAGE,
                       o->val_output
                           ? "--val-output without --val-fraction, --val-docs or "
                             "--val-tokens"
                           : "%s on standard output: name the validation shard (--val-output FILE)",
                       val);
    if (o->field && !*o->field)
        return gk_errf(e, GK_EUSAGE, "--field: empty name");
    if (o->column && !*o->column)
        return gk_errf(e, GK_EUSAGE, "--column: empty name");
    if (o->shard_tokens && !o->output)
        return gk_errf(e, GK_EUSAGE, "--shard-tokens needs -o PREFIX");
    if (o->learn && (!o->vocab_out || o->output || o->vocab || o->char_level || o->decode ||
                     vals || o->shard_tokens || o->max_tokens))
        return gk_errf(e, GK_EUSAGE, o->vocab_out ? "--learn writes a vocabulary only: it takes "
                                                    "inputs, --vocab-out DIR and the reading "
                                                    "options (not -o, -V, --char, -d, --val-*, "
                                                    "--shard-tokens, --max-tokens)"
                                                  : "--learn needs --vocab-out DIR");
    if ((o->learn_memory || o->nspecials || o->pattern) && !o->learn)
        return gk_errf(e, GK_EUSAGE, "%s goes with --learn%s",
                       o->pattern     ? "--pattern"
                       : o->nspecials ? "--special"
                                      : "--learn-memory",
                       o->pattern ? " (a vocabulary encodes with the pattern it was learned with)"
                                  : "");
    if (o->pattern && gk_pattern_of(o->pattern) < 0)
        return gk_errf(e, GK_EUSAGE, "--pattern %s: gpt2 or gpt4", o->pattern);
    if (o->vocab_out && !o->char_level && !o->learn)
        return gk_errf(e, GK_EUSAGE, "--vocab-out goes with --char or --learn");
    if (o->doc_sep && !*o->doc_sep)
        return gk_errf(e, GK_EUSAGE, "--doc-sep: empty separator");
    if (o->decode && (o->output || o->char_level || o->val_output || o->shard_tokens))
        return gk_errf(e, GK_EUSAGE, "-d writes text to stdout; it takes only -V and shards");
    int to_stdout = !o->decode && !o->learn && (!o->output || strcmp(o->output, "-") == 0);
    if (to_stdout && isatty(STDOUT_FILENO))
        return gk_errf(e, GK_EUSAGE, "refusing to write binary tokens to a terminal; "
                                     "redirect stdout or use -o FILE");
    return 0;
}

static int load_vocab(const options *o, gk_vocab **v, gk_err *e)
{
    char path[4096];
    int rc = gk_vocab_find(path, sizeof path, o->vocab, e);
    if (rc == 0)
        rc = gk_vocab_load(v, path, e);
    if (rc == 0 && o->char_level && gk_vocab_type(*v) != GK_VOCAB_CHAR) {
        gk_vocab_free(*v);
        *v = NULL;
        rc = gk_errf(e, GK_EUSAGE, "%s: --char needs a char vocabulary file (from --vocab-out)",
                     path);
    }
    return rc;
}

static int save_char_vocab(const gk_vocab *v, const char *path, gk_err *e)
{
    gk_outfile f;
    int rc = gk_outfile_open(&f, path, e);
    if (rc)
        return rc;
    if ((rc = gk_vocab_save_chars(v, f.fp, e))) {
        int err = errno;
        gk_outfile_abort(&f);
        if (rc == GK_EIO) { /* a write error: name the file, not the writer */
            errno = err;
            rc = gk_errno(e, path);
        }
        return rc;
    }
    return gk_outfile_commit(&f, e);
}

/* The encoder as a document consumer, stopping the reading at --max-docs or --max-tokens
 * (documents begin only after the last one's tokens are all written, so the count is exact). */
typedef struct limiter {
    tk_encoder *enc;
    tk_sink *sink;
    int64_t max_docs, docs;
} limiter;

static int enc_begin(void *c, gk_err *e)
{
    limiter *l = c;
    if ((l->max_docs && l->docs >= l->max_docs) || tk_sink_full(l->sink))
        return TK_STOP;
    l->docs++;
    return tk_encoder_begin(l->enc, e);
}

static int enc_feed(void *c, const char *t, size_t n, gk_err *e)
{
    limiter *l = c;
    return tk_sink_full(l->sink) ? TK_STOP : tk_encoder_feed(l->enc, t, n, e);
}

static int enc_end(void *c, gk_err *e) { return tk_encoder_end(((limiter *)c)->enc, e); }

/* "12.3 MB/s", "850 kB/s", "96 B/s": three significant figures in the unit that fits. */
static void format_rate(char *out, size_t cap, double bytes_per_s)
{
    static const char *units[] = {"B/s", "kB/s", "MB/s", "GB/s"};
    int u = 0;
    while (u < 3 && bytes_per_s >= 1000) {
        bytes_per_s /= 1000;
        u++;
    }
    snprintf(out, cap, "%.*f %s", bytes_per_s < 10 ? 2 : bytes_per_s < 100 ? 1 : 0, bytes_per_s,
             units[u]);
}

static const char *plural(long long n) { return n == 1 ? "" : "s"; }

/* "skipped 4 archive members that are not regular files: 2 links, 1 device, 1 FIFO" */
static void special_summary(const tk_read_stats *rs)
{
    static const char *kinds[TK_SKIP_KINDS] = {"link", "device", "FIFO", "other"};
    char list[256] = "";
    long long total = 0;
    for (int k = 0; k < TK_SKIP_KINDS; k++) {
        long long n = (long long)rs->skipped_special[k];
        size_t len = strlen(list);
        if (n)
            snprintf(list + len, sizeof list - len, "%s%lld %s%s", total ? ", " : "", n, kinds[k],
                     k == TK_SKIP_OTHER ? "" : plural(n));
        total += n;
    }
    if (total)
        gk_info("skipped %lld archive member%s that %s: %s", total, plural(total),
                total == 1 ? "is not a regular file" : "are not regular files", list);
}

/* What the sink saw, kept for the summary (the sink is gone by then). */
typedef struct outcome {
    int64_t tokens, val_docs, val_tokens;
} outcome;

/* The lines about what gpt-tokenize's own options did: bad lines skipped, an early stop, the
 * first documents sent to validation. */
static void options_summary(const options *o, const tk_stats *st, const tk_read_stats *rs,
                            const outcome *out)
{
    if (rs->null_rows)
        gk_info("skipped %lld null row%s of Parquet", (long long)rs->null_rows,
                plural(rs->null_rows));
    if (rs->bad_lines || rs->bad_items) {
        char items[64] = "";
        if (rs->bad_items)
            snprintf(items, sizeof items, "%s%lld bad JSON array item%s",
                     rs->bad_lines ? " and " : "", (long long)rs->bad_items, plural(rs->bad_items));
        if (rs->bad_lines)
            gk_warn("skipped %lld bad JSON line%s%s (the first: %s)", (long long)rs->bad_lines,
                    plural(rs->bad_lines), items, rs->first_bad);
        else
            gk_warn("skipped %s (the first: %s)", items, rs->first_bad);
    }
    if (rs->stopped && o->max_docs && st->docs >= o->max_docs)
        gk_info("stopped after %lld document%s (--max-docs)", (long long)st->docs,
                plural(st->docs));
    else if (o->max_tokens && out->tokens >= o->max_tokens) /* reading may have ended first */
        gk_info("stopped after %lld token%s (--max-tokens)", (long long)out->tokens,
                plural(out->tokens));
    if (o->val_docs || o->val_tokens)
        gk_info("validation: %lld document%s (the first), %lld token%s", (long long)out->val_docs,
                plural(out->val_docs), (long long)out->val_tokens, plural(out->val_tokens));
}

static void summary(const tk_stats *st, const tk_read_stats *rs, const outcome *out, double secs)
{
    if (st->replaced)
        gk_warn("replaced %lld invalid UTF-8 sequence%s with U+FFFD", (long long)st->replaced,
                plural(st->replaced));
    if (rs->skipped_binary)
        gk_info("skipped %lld binary archive member%s", (long long)rs->skipped_binary,
                plural(rs->skipped_binary));
    special_summary(rs);
    char took[64] = "", rate[32];
    if (secs >= 1)
        snprintf(took, sizeof took, " in %.2f s", secs);
    else
        snprintf(took, sizeof took, " in %.1f ms", secs * 1e3);
    /* Below 100 kB the time is mostly starting threads, not encoding: no rate. */
    if (secs > 0 && st->bytes >= 100000) {
        format_rate(rate, sizeof rate, (double)st->bytes / secs);
        snprintf(took + strlen(took), sizeof took - strlen(took), " (%s)", rate);
    }
    gk_info("%lld document%s, %lld byte%s, %lld token%s%s", (long long)st->docs, plural(st->docs),
            (long long)st->bytes, plural(st->bytes), (long long)out->tokens, plural(out->tokens),
            took);
}

static int fetch_input(void *ctx, int i, char *path, size_t cap, gk_err *e)
{
    return tk_inputs_fetch(ctx, i, path, cap, e);
}

static int input_done(void *ctx, int i, int rc, gk_err *e)
{
    (void)i;
    return tk_inputs_done_s3(ctx, rc, e);
}

/* Encodes; with --char and no -V the text is read whole first to build the vocabulary (held in
 * a temporary file, then replayed). */
static int encode(const options *o, tk_inputs *in, gk_err *e)
{
    double t0 = gk_now();
    tk_read_opts ro = {in->paths, in->n, o->doc_sep, o->column, o->field, (size_t)o->max_line,
                       o->skip_bad, NULL, in->sizes, fetch_input, input_done, in, in->tmpdir};
    tk_read_stats rs = {0};
    tk_collector held = {0};
    gk_vocab *v = NULL;
    tk_sink *sink = NULL;
    tk_encoder *enc = NULL;
    int collect = o->char_level && !o->vocab;
    int rc = 0;
    if (collect) {
        tk_consumer c = tk_collector_consumer(&held);
        rc = tk_collector_init(&held, in->tmpdir, e);
        if (!rc)
            rc = tk_read_all(&ro, &c, &rs, e);
        tk_inputs_stop(in);
        if (!rc)
            rc = tk_collector_char_vocab(&held, &v, e);
    } else {
        rc = load_vocab(o, &v, e);
        t0 = gk_now(); /* the summary's rate is the encoding rate, vocabulary load excluded */
    }
    if (!rc && o->vocab_out)
        rc = save_char_vocab(v, o->vocab_out, e);
    tk_sink_opts so = {o->output,     o->shard_tokens, o->val_fraction,
                       o->val_docs,   o->val_tokens,   o->val_output,
                       o->max_tokens, v ? gk_vocab_size(v) : 0,
                       v ? gk_vocab_fingerprint(v) : 0, in->s3, in->tmpdir};
    if (!rc)
        rc = tk_sink_open(&sink, &so, e);
    int threads = o->threads ? (int)o->threads : omp_get_num_procs();
    if (!rc)
        rc = tk_encoder_create(&enc, v, o->allow_special, threads, sink, e);
    limiter lim = {enc, sink, o->max_docs, 0};
    tk_consumer c = {enc_begin, enc_feed, enc_end, &lim};
    if (!rc && collect && (rc = tk_collector_replay(&held, &c, e)) == TK_STOP) {
        rs.stopped = 1;
        rc = 0;
    } else if (!rc && !collect) {
        ro.tokens = &tk_encoder_stats(enc)->tokens;
        rc = tk_read_all(&ro, &c, &rs, e);
        tk_inputs_stop(in); /* a download the early stop left running: done before the summary */
    }
    if (!rc)
        rc = tk_encoder_finish(enc, e);
    outcome out = {0};
    if (!rc) {
        out = (outcome){tk_sink_tokens(sink), tk_sink_val_docs(sink), tk_sink_val_tokens(sink)};
        rc = tk_sink_finish(sink, e);
        sink = NULL;
    }
    if (!rc) {
        options_summary(o, tk_encoder_stats(enc), &rs, &out);
        summary(tk_encoder_stats(enc), &rs, &out, gk_now() - t0);
    }
    tk_sink_abort(sink);
    tk_encoder_free(enc);
    tk_collector_free(&held);
    gk_vocab_free(v);
    return rc;
}

/* --learn: the vocabulary from the inputs' documents (learn.h). */
static int learn(const options *o, tk_inputs *in, gk_err *e)
{
    tk_read_opts ro = {in->paths, in->n, o->doc_sep, o->column, o->field, (size_t)o->max_line,
                       o->skip_bad, NULL, in->sizes, fetch_input, input_done, in, in->tmpdir};
    gk_host_mem h;
    gk_host_mem_read(&h);
    size_t memory = o->learn_memory         ? (size_t)o->learn_memory
                    : h.avail != GK_MEM_UNKNOWN ? h.avail / 2
                                              : (size_t)4 << 30;
    int threads = o->threads ? (int)o->threads : omp_get_num_procs();
    tk_learn_opts lo = {o->learn, o->pattern ? gk_pattern_of(o->pattern) : GK_PATTERN_GPT2,
                        o->vocab_out, memory, threads, o->max_docs, NULL, o->specials,
                        o->nspecials};
    int rc = tk_learn(&lo, &ro, e);
    tk_inputs_stop(in);
    return rc;
}

static int decode(const options *o, gk_s3 *s3, char **inputs, int ninputs, gk_err *e)
{
    int raw = 0, rc = tk_decode(o->vocab, s3, inputs, ninputs, &raw, e);
    if (!rc && raw)
        gk_verbose("read %d header-less input%s as raw uint16 tokens (nanoGPT format)", raw,
                   raw == 1 ? "" : "s");
    return rc;
}

/* A closed stdin (`<&-`) is reopened on /dev/null at start: reading it would encode nothing
 * and succeed, so it is an error wherever stdin is an input. */
static int check_stdin(char **inputs, int ninputs, gk_err *e)
{
    for (int i = 0; i < ninputs; i++)
        if (strcmp(inputs[i], "-") == 0 && gk_std_was_closed(STDIN_FILENO))
            return gk_errf(e, GK_EIO,
                           "standard input is closed (give input files, or redirect it)");
    return 0;
}

/* The operands as inputs; hf:// datasets with the hub settings from the environment
 * (HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, and the cache's HF_HUB_CACHE / HF_HOME). */
static int expand(tk_inputs *in, char **ops, int n, const gk_env *vars, gk_err *e)
{
    char cache[2048];
    gk_hub_conf hub = {vars->hf_endpoint, vars->hf_token, vars->hf_offline, cache,
                       vars->hub_stall_s};
    int rc = 0, need_hub = 0;
    for (int i = 0; i < n; i++)
        need_hub |= gk_hub_is_dataset_url(ops[i]);
    if (need_hub)
        rc =
            gk_hub_cache_dir(cache, sizeof cache, vars->hf_hub_cache, vars->hf_home, vars->home, e);
    for (int i = 0; rc == 0 && i < n; i++)
        rc = tk_inputs_expand(in, ops[i], &hub, e);
    return rc;
}

/* A client for the s3:// operands and outputs, if any (credentials, region and endpoint from
 * the environment and ~/.aws; GPT_S3_PART_SIZE, as gpt-train's: gk_env_s3_conf). */
static int s3_setup(const options *o, const gk_env *env, char **ops, int n, tk_inputs *in,
                    gk_s3 **s3, gk_err *e)
{
    int need = gk_s3_is_url(o->output ? o->output : "") ||
               gk_s3_is_url(o->val_output ? o->val_output : "");
    for (int i = 0; i < n; i++)
        need |= gk_s3_is_url(ops[i]);
    gk_s3_conf conf;
    int rc = need ? gk_env_s3_conf(env, &conf, e) : 0;
    if (need && !rc && !(rc = gk_s3_open(s3, &conf, e)))
        in->s3 = *s3;
    return rc;
}

/* SIGHUP, SIGINT, SIGPIPE, SIGTERM: temporaries removed, the upload under way aborted and the
 * staging directory removed (stage.h: the uploader does it and dies, when one is under way),
 * then death by the signal, as gk_outfile_cleanup_on_signals does for local outputs. */
static void on_signal(int sig)
{
    if (tk_stage_signal(sig))
        return;
    gk_outfile_unlink_temps();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void cleanup_on_signals(void)
{
    static const int sigs[] = {SIGHUP, SIGINT, SIGPIPE, SIGTERM};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
        struct sigaction old, sa = {0};
        if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler != SIG_DFL)
            continue; /* ignored (nohup): leave it */
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

int main(int argc, char **argv)
{
    gk_env vars;
    gk_env_tool_start(&vars, "gpt-tokenize"); /* the environment, read once here */
    options o = {0};
    gk_err e = {0};
    int first;
    int rc = parse(&o, argc, argv, &first, &e);
    if (rc == GK_OPT_HELP || rc == GK_OPT_VERSION)
        return 0;
    gk_log_setup("gpt-tokenize", o.quiet ? GK_LOG_QUIET : GK_LOG_NORMAL + o.verbose);
    char val_beside[4400];
    if (rc == 0)
        default_val_output(&o, val_beside, sizeof val_beside);
    if (rc == 0)
        rc = check_options(&o, &e);
    static char *stdin_only[] = {"-"};
    char **inputs = first < argc ? argv + first : stdin_only;
    int ninputs = first < argc ? argc - first : 1;
    tk_inputs in = {0};
    in.tmpdir = vars.tmpdir; /* TMPDIR, else /tmp: downloads, staged outputs, temporary files */
    gk_s3 *s3 = NULL;
    if (rc == 0)
        rc = check_stdin(inputs, ninputs, &e);
    if (rc == 0) /* -d too: shards in a bucket */
        rc = s3_setup(&o, &vars, inputs, ninputs, &in, &s3, &e);
    if (rc == 0 && !o.decode) /* directories, patterns and hf:// stand for their files */
        rc = expand(&in, inputs, ninputs, &vars, &e);
    if (rc == 0) {
        cleanup_on_signals(); /* no OUT.tmp.XXXXXX, staging directory or upload left by a signal */
        rc = o.decode  ? decode(&o, s3, inputs, ninputs, &e)
             : o.learn ? learn(&o, &in, &e)
                       : encode(&o, &in, &e);
    }
    tk_inputs_free(&in);
    if (s3 && gk_s3_retries(s3))
        gk_warn("%ld S3 requests retried", gk_s3_retries(s3));
    gk_s3_close(s3);
    if (rc == 0)
        rc = gk_std_finish(&e); /* a summary or text that could not be written is a failure */
    if (rc) {
        gk_error("%s", e.msg);
        return gk_exit_status(rc);
    }
    return 0;
}
