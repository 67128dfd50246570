/* opt.c: getopt_long driven by a gk_opt table (see opt.h). */
#include "common/opt.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "common/io/safetensors.h"
#include "common/num.h"

#ifndef GPTKIT_VERSION
#define GPTKIT_VERSION "dev"
#endif

enum { OPT_HELP = 1000, OPT_VERSION = 1001, OPT_LONG_BASE = 2000 };

static size_t table_len(const gk_opt *tab)
{
    size_t n = 0;
    while (tab[n].long_name)
        n++;
    return n;
}

static int store(const gk_opt *o, const char *arg, gk_err *e)
{
    char what[64];
    snprintf(what, sizeof what, "--%s", o->long_name);
    int limited = o->min != 0 || o->max != 0;
    switch (o->kind) {
    case GK_OPT_FLAG: *(int *)o->dest = 1; return 0;
    case GK_OPT_COUNT: (*(int *)o->dest)++; return 0;
    case GK_OPT_STR: *(const char **)o->dest = arg; return 0;
    case GK_OPT_INT:
        return gk_parse_i64(arg, limited ? (int64_t)o->min : INT64_MIN,
                            limited ? (int64_t)o->max : INT64_MAX, (int64_t *)o->dest, what, e);
    case GK_OPT_DOUBLE:
        return gk_parse_double(arg, limited ? o->min : -1e300, limited ? o->max : 1e300,
                               (double *)o->dest, what, e);
    case GK_OPT_CALL:
    case GK_OPT_KEYVAL: {
        const gk_opt_call *call = o->dest;
        return call->fn(call->ctx, arg, e);
    }
    }
    return gk_errf(e, GK_EUSAGE, "%s: bad option kind", what);
}

/* The GK_OPT_KEYVAL entry of tab, or NULL. */
static const gk_opt *keyval_entry(const gk_opt *tab, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (tab[i].kind == GK_OPT_KEYVAL)
            return &tab[i];
    return NULL;
}

/* An option getopt_long did not know: a long one ("--key=value", or "--key" for the callback
 * to explain) goes to the GK_OPT_KEYVAL entry if any. */
static int unknown(const gk_opt *tab, size_t n, const char *arg, gk_err *e)
{
    const gk_opt *kv = keyval_entry(tab, n);
    if (optopt >= OPT_HELP) /* a known long option given "=value" it does not take */
        return gk_errf(e, GK_EUSAGE, "option %.*s takes no value", (int)strcspn(arg, "="), arg);
    if (optopt)
        return gk_errf(e, GK_EUSAGE, "unknown option -%c (see --help)", optopt);
    if (kv && strncmp(arg, "--", 2) == 0 && arg[2])
        return store(kv, arg, e);
    return gk_errf(e, GK_EUSAGE, "unknown option %s (see --help)", arg);
}

int gk_opt_parse(const gk_opt *tab, int argc, char **argv, int *first_operand, gk_err *e)
{
    size_t n = table_len(tab);
    struct option *lopts = calloc(n + 3, sizeof *lopts);
    char *sopts = calloc(2 * n + 4, 1);
    if (!lopts || !sopts) {
        free(lopts);
        free(sopts);
        return gk_errf(e, GK_ENOMEM, "out of memory parsing options");
    }
    size_t k = 0;
    sopts[k++] = ':'; /* report missing arguments as ':' */
    sopts[k++] = 'h';
    size_t nl = 0;
    for (size_t i = 0; i < n; i++) {
        if (tab[i].kind == GK_OPT_KEYVAL)
            continue; /* not an option of its own */
        int has_arg = tab[i].kind == GK_OPT_FLAG || tab[i].kind == GK_OPT_COUNT ? no_argument
                                                                                : required_argument;
        lopts[nl++] = (struct option){tab[i].long_name, has_arg, NULL, OPT_LONG_BASE + (int)i};
        if (tab[i].short_name) {
            sopts[k++] = (char)tab[i].short_name;
            if (has_arg)
                sopts[k++] = ':';
        }
    }
    lopts[nl] = (struct option){"help", no_argument, NULL, OPT_HELP};
    lopts[nl + 1] = (struct option){"version", no_argument, NULL, OPT_VERSION};
    opterr = 0;
    optind = 0; /* 0, not 1: also drops what getopt kept of an earlier parse (the rest of an
                 * option cluster it stopped in, in argv strings that may be gone) */
    int rc = GK_OPT_DONE, c;
    while (rc == GK_OPT_DONE && (c = getopt_long(argc, argv, sopts, lopts, NULL)) != -1) {
        if (c == 'h' || c == OPT_HELP)
            rc = GK_OPT_HELP;
        else if (c == OPT_VERSION)
            rc = GK_OPT_VERSION;
        else if (c == ':')
            rc = gk_errf(e, GK_EUSAGE, "option %s needs an argument", argv[optind - 1]);
        else if (c == '?')
            rc = unknown(tab, n, argv[optind - 1], e);
        else {
            const gk_opt *o = NULL;
            if (c >= OPT_LONG_BASE)
                o = &tab[c - OPT_LONG_BASE];
            for (size_t i = 0; !o && i < n; i++)
                if (tab[i].short_name == c)
                    o = &tab[i];
            rc = store(o, optarg, e);
        }
    }
    *first_operand = optind;
    free(lopts);
    free(sopts);
    return rc;
}

int gk_opt_parse_main(const gk_opt *tab, const char *prog, const char *usage, const char *footer,
                      int argc, char **argv, int *first_operand, gk_err *e)
{
    int rc = gk_opt_parse(tab, argc, argv, first_operand, e);
    if (rc == GK_OPT_HELP)
        gk_opt_help(stdout, usage, tab, footer);
    else if (rc == GK_OPT_VERSION)
        gk_opt_version(stdout, prog);
    return rc;
}

void gk_opt_help(FILE *f, const char *usage, const gk_opt *tab, const char *footer)
{
    fprintf(f, "usage: %s\n\noptions:\n", usage);
    for (const gk_opt *o = tab; o->long_name; o++) {
        char left[64];
        int len = 0;
        if (o->short_name)
            len = snprintf(left, sizeof left, "-%c, --%s", o->short_name, o->long_name);
        else
            len = snprintf(left, sizeof left, "    --%s", o->long_name);
        if (o->arg_name && len > 0 && (size_t)len < sizeof left)
            snprintf(left + len, sizeof left - (size_t)len, " %s", o->arg_name);
        fprintf(f, "  %-28s %s\n", left, o->help);
    }
    fprintf(f, "  %-28s %s\n  %-28s %s\n", "-h, --help", "show this help and exit", "    --version",
            "show the version and exit");
    if (footer)
        fprintf(f, "\n%s", footer);
}

void gk_opt_version(FILE *f, const char *prog)
{
    fprintf(f, "%s (gptkit) %s\n", prog, GPTKIT_VERSION);
}

const char *gk_opt_model_path(const char *path, const char *env_model)
{
    if (!path || !*path)
        path = env_model;
    return path && *path ? path : "out/latest.safetensors";
}

int gk_opt_dtype(const char *dtype, int *bf16, gk_err *e)
{
    enum gk_dtype dt = GK_DT_F32;
    *bf16 = -1;
    if (!dtype)
        return 0;
    if (gk_dtype_from_user(dtype, &dt) != 0)
        return gk_errf(e, GK_EUSAGE, "--dtype %s: " GK_OPT_DTYPE_CHOICES, dtype);
    if (dt == GK_DT_F16)
        return gk_errf(e, GK_EUSAGE, "--dtype %s: not for inference; " GK_OPT_DTYPE_CHOICES, dtype);
    *bf16 = dt == GK_DT_BF16;
    return 0;
}

int gk_opt_weights(const char *dtype, int *weights, gk_err *e)
{
    enum gk_dtype dt = GK_DT_F32;
    *weights = GK_WEIGHTS_DEFAULT;
    if (!dtype)
        return 0;
    if (!strcmp(dtype, "int8")) { /* llama.cpp's Q8_0: not a checkpoint dtype */
        *weights = GK_WEIGHTS_INT8;
        return 0;
    }
    if (gk_dtype_from_user(dtype, &dt) != 0)
        return gk_errf(e, GK_EUSAGE, "--dtype %s: " GK_OPT_WEIGHTS_CHOICES, dtype);
    *weights = dt == GK_DT_BF16  ? GK_WEIGHTS_BF16
               : dt == GK_DT_F16 ? GK_WEIGHTS_F16
                                 : GK_WEIGHTS_F32;
    return 0;
}

int gk_opt_weights_bf16(int weights)
{
    return weights == GK_WEIGHTS_DEFAULT ? -1 : weights == GK_WEIGHTS_BF16;
}
