/* main.c: gpt-ckpt: checkpoints in and out: import from HuggingFace or llm.c, info, export,
 * convert, verify. Picks the subcommand; each module parses its own options (ck.h). */
#include <stdio.h>
#include <string.h>

#include "ck.h"
#include "common/env.h"
#include "common/log.h"
#include "common/opt.h"
#include "common/proc.h"

static const struct command {
    const char *name;
    int (*run)(int argc, char **argv, const gk_env *env, gk_err *e);
    const char *args, *help;
} commands[] = {
    {"import", ck_import_main, "NAME|DIR|FILE [-o OUT]",
     "HuggingFace GPT-2 or llm.c -> checkpoint"},
    {"info", ck_info_main, "FILE [--stats] [--json]", "what a checkpoint holds"},
    {"export", ck_export_main, "FILE --hf DIR | --llmc FILE", "checkpoint -> HuggingFace / llm.c"},
    {"convert", ck_convert_main, "FILE -o OUT --dtype TYPE",
     "parameters as float32, bfloat16, float16 or int8"},
    {"verify", ck_verify_main, "FILE...", "check header, sizes and checksums"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: gpt-ckpt COMMAND [options] ARGS\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        fprintf(f, "  %-8s %-28s %s\n", commands[i].name, commands[i].args, commands[i].help);
    fprintf(f, "\n'gpt-ckpt COMMAND --help' shows a command's options.\n"
               "Example: gpt-ckpt import gpt2 && gpt-ckpt info gpt2.safetensors\n");
}

/* Runs the command named by argv[1]; returns the exit status. */
static int run(int argc, char **argv, const gk_env *env, gk_err *e)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        gk_opt_version(stdout, "gpt-ckpt");
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        if (strcmp(argv[1], commands[i].name) != 0)
            continue;
        int rc = commands[i].run(argc - 1, argv + 1, env, e); /* help and version are printed */
        if (rc == GK_OPT_HELP || rc == GK_OPT_VERSION)
            return 0;
        if (rc && e->msg[0]) /* empty: the command printed its errors (verify) */
            gk_error("%s", e->msg);
        return gk_exit_status(rc);
    }
    gk_error("unknown command '%s' (import, info, export, convert, verify; see --help)", argv[1]);
    return 2;
}

int main(int argc, char **argv)
{
    gk_env env;
    gk_env_tool_start(&env, "gpt-ckpt"); /* the environment, read once here */
    gk_err e = {0};
    int status = run(argc, argv, &env, &e);
    if (status == 0 && gk_std_finish(&e) != 0) { /* e.g. stdout on a full disk */
        gk_error("%s", e.msg);
        status = 1;
    }
    return status;
}
