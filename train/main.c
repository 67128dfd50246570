/* main.c: gpt-train: trains GPT-2 family models from token shards.
 * Parses -c FILE and --key=value overrides into the settings, prints the effective config,
 * and hands over to the run (setup.c, loop.c). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/proc.h"
#include "common/log.h"
#include "common/opt.h"
#include "run.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1; /* the loop finishes its step, checkpoints and exits 0 */
}

static void install_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND; /* a second signal ends the process at once */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: gpt-train [-c FILE.conf] [--key=value ...]\n"
            "Trains a GPT-2 model on token shards (see gpt-tokenize). Settings come from the\n"
            "built-in defaults (nanoGPT's train.py), then FILE.conf (a path, or a preset name such as\n"
            "shakespeare), then --key=value overrides, in order.\n\n"
            "options:\n"
            "  -c, --config FILE       config file or preset name\n"
            "  -q, --quiet             no messages but errors (the training log still goes to stdout)\n"
            "  -v, --verbose           more messages\n"
            "      --print-config      print the effective config and exit\n"
            "  -h, --help              show this help and exit\n"
            "      --version           show the version and exit\n\n"
            "settings (--key=value, or key = value in a config file):\n");
    gk_config_help(tr_settings_keys, f);
}

static int load_config(tr_run *r, const char *name, gk_err *e)
{
    char path[4096];
    int rc = gk_config_resolve_path(name, path, sizeof path, e);
    return rc ? rc : gk_config_load_file(r->cfg, path, e);
}

/* Applies argv in order; returns 1 when the run should not start (help, version, print-config). */
static int parse_args(tr_run *r, int argc, char **argv, int *verbosity, gk_err *e)
{
    int print_only = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rc = 0;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 1;
        } else if (strcmp(a, "--version") == 0) {
            gk_opt_version(stdout, "gpt-train");
            return 1;
        } else if (strcmp(a, "-q") == 0 || strcmp(a, "--quiet") == 0) {
            *verbosity = GK_LOG_QUIET;
        } else if (strcmp(a, "-v") == 0 || strcmp(a, "--verbose") == 0) {
            *verbosity = GK_LOG_VERBOSE;
        } else if (strcmp(a, "--print-config") == 0) {
            print_only = 1;
        } else if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0 || strncmp(a, "--config=", 9) == 0) {
            const char *name = a[1] == 'c' || a[8] == '\0' ? (i + 1 < argc ? argv[++i] : NULL) : a + 9;
            rc = name ? load_config(r, name, e) : gk_errf(e, GK_EUSAGE, "%s needs a file", a);
        } else if (strncmp(a, "--", 2) == 0 && strchr(a, '=')) {
            rc = gk_config_set_arg(r->cfg, a, e);
        } else {
            return gk_errf(e, GK_EUSAGE, "unexpected argument '%s' (settings are --key=value; see --help)", a);
        }
        if (rc)
            return rc;
    }
    if (print_only) {
        gk_config_print(r->cfg, stdout);
        return 1;
    }
    return 0;
}

static int run(tr_run *r, gk_err *e)
{
    if (gk_verbosity() >= GK_LOG_NORMAL) {
        fprintf(stderr, "gpt-train: effective config:\n");
        gk_config_print(r->cfg, stderr);
    }
    if (!(r->settings_json = gk_config_to_json(r->cfg, e)))
        return e->code ? e->code : GK_ENOMEM;
    int rc = tr_run_setup(r, e);
    if (rc)
        return rc;
    install_signals();
    return r->s.eval_only ? tr_run_eval_only(r, e) : tr_run_train(r, e);
}

int main(int argc, char **argv)
{
    gk_std_fds_open(); /* before anything opens a file: none may land on fd 0-2 */
    tr_run r;
    memset(&r, 0, sizeof r);
    r.stop = &stop_requested;
    gk_err e = {0};
    int verbosity = GK_LOG_NORMAL;
    gk_log_setup("gpt-train", verbosity);
    int rc = gk_config_create(&r.cfg, tr_settings_keys, &r.s, &e);
    if (!rc)
        rc = parse_args(&r, argc, argv, &verbosity, &e);
    gk_log_setup("gpt-train", verbosity);
    if (rc == 0)
        rc = run(&r, &e);
    tr_run_free(&r);
    if (rc < 0) {
        gk_error("%s", e.msg);
        return gk_exit_status(rc);
    }
    return 0;
}
