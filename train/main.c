/* main.c: gpt-train: trains GPT-2 family models from token shards.
 * Parses -c FILE and --key=value overrides into the settings (settings.h's tr_cli table), checks
 * them all, prints the effective config, and hands over to the run (setup.c, loop.c), or with
 * --plan to the memory plan (plan.c). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/env.h"
#include "common/log.h"
#include "common/opt.h"
#include "common/proc.h"
#include "run.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    /* the loop finishes its step, checkpoints and exits 0; stored atomically: the comm's watch
     * thread reads it too (gk_comm_stop_on) */
    __atomic_store_n(&stop_requested, 1, __ATOMIC_RELAXED);
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

static const char usage[] =
    "gpt-train [-c FILE.conf] [--key=value ...]\n"
    "Trains a GPT-2 model on token shards (see gpt-tokenize). Settings come from the built-in\n"
    "defaults (nanoGPT's train.py), then FILE.conf (a "
    "path, or a preset name such as shakespeare),\n"
    "then --key=value overrides, in the order given. The whole config is checked before anything\n"
    "is read or written.";

static const char footer[] = "settings (--key=value, or key = value in a config file):\n";

/* Applies argv in order and checks the result; returns 1 when the run should not start (help,
 * version, print-config); r->plan for --plan. */
static int parse_args(tr_run *r, int argc, char **argv, int *verbosity, gk_err *e)
{
    int first = 0;
    tr_cli c;
    tr_cli_init(&c, r->cfg, tr_settings_load_config);
    int rc = gk_opt_parse_main(c.tab, "gpt-train", usage, footer, argc, argv, &first, e);
    if (rc == GK_OPT_HELP)
        gk_config_help(tr_settings_keys, stdout);
    if (rc)
        return rc == GK_OPT_HELP || rc == GK_OPT_VERSION ? 1 : rc;
    *verbosity = c.quiet ? GK_LOG_QUIET : c.verbose ? GK_LOG_VERBOSE : GK_LOG_NORMAL;
    if (first < argc)
        return gk_errf(e, GK_EUSAGE,
                       "unexpected argument '%s' (settings are --key=value; see --help)",
                       argv[first]);
    if ((rc = tr_settings_check(&r->s, r->cfg, e)))
        return rc;
    if (c.print_only) {
        gk_config_print(r->cfg, stdout);
        return 1;
    }
    r->plan = c.plan || c.plan_memory > 0 || c.plan_host_memory > 0;
    r->plan_memory = c.plan_memory;
    r->plan_host_memory = c.plan_host_memory;
    return 0;
}

/* Where this process sits: one process, a rank started by a launcher, or the launcher of this
 * machine's ranks (nproc_per_node, Kubeflow Trainer's PET_NPROC_PER_NODE). *spawned: it was the
 * launcher, and its ranks have run. Ranks other than 0 print errors only, prefixed with the
 * rank. */
static int place(tr_run *r, int argc, char **argv, int *spawned, gk_err *e)
{
    static char prog[64];
    tr_launch l;
    int rc = tr_launch_from_env(&l, r->env.getenv_fn, NULL, e); /* the launcher's variables */
    /* l.spawned: a rank this launcher started */
    int nproc = l.spawn ? l.spawn : l.spawned ? 1 : (int)r->s.nproc_per_node;
    *spawned = 0;
    if (!rc && nproc > 1 && !l.spawn && l.world_size > 1)
        return gk_errf(e, GK_EUSAGE,
                       "%s: nproc_per_node = %d, but %s started this process as rank %d of %d "
                       "already (leave nproc_per_node at 1 under a launcher)",
                       gk_config_origin(r->cfg, "nproc_per_node"), nproc, l.source, l.rank,
                       l.world_size);
    if (!rc && nproc > 1) {
        *spawned = 1;
        gk_info("starting %d ranks on this machine (ranks %d..%d of %d)", nproc,
                l.node_rank * nproc, l.node_rank * nproc + nproc - 1, l.nnodes * nproc);
        /* each rank reads a bucket's shards itself */
        return tr_launch_spawn(&l, nproc, argc, argv, 30.0, e);
    }
    if (!rc && l.rank > 0) {
        snprintf(prog, sizeof prog, "gpt-train[rank %d]", l.rank);
        gk_log_setup(prog, GK_LOG_QUIET);
    }
    if (!rc)
        rc = tr_dist_open(&r->dist, &l, r->s.dist_timeout, &r->env, e);
    if (!rc && l.world_size > 1)
        gk_info("rank 0 of %d (%s), rendezvous at %s%s", l.world_size, l.source,
                gk_store_address(r->dist.store),
                strcmp(r->s.reduce_dtype, "bfloat16") == 0 ? "; gradient sums in bfloat16" : "");
    return rc;
}

/* train_data, val_data or out_dir in a bucket: the client's settings, for every rank (data.h;
 * the checkpoint to resume from, on another machine than rank 0: setup.c). */
static int s3_data_conf(tr_run *r, gk_err *e)
{
    r->s3data = strstr(r->s.train_data, "s3://") || strstr(r->s.val_data, "s3://");
    /* every rank may fetch the start */
    if (!r->s3data && !gk_s3_is_url(r->s.out_dir) && !gk_s3_is_url(r->s.init_from))
        return 0;
    return gk_env_s3_conf(&r->env, &r->s3conf, e); /* and GPT_S3_PART_SIZE (tests: 5 MiB) */
}

/* out_dir = s3://...: rank 0 opens the bucket (the staging directory in TMPDIR) and trains into
 * the staging directory (s3out.h). */
static int open_s3_out_dir(tr_run *r, gk_err *e)
{
    if (!gk_s3_is_url(r->s.out_dir) || r->s.eval_only || !tr_dist_is_root(&r->dist))
        return 0;
    gk_s3_conf conf;
    int rc = gk_env_s3_conf(&r->env, &conf, e);
    if (!rc)
        rc = tr_s3out_open(&r->s3out, r->s.out_dir, &conf, r->env.tmpdir, r->s.init_from, e);
    if (!rc)
        r->s.out_dir = tr_s3out_stage(r->s3out);
    return rc;
}

static int run(tr_run *r, int argc, char **argv, gk_err *e)
{
    int spawned, rc = place(r, argc, argv, &spawned, e);
    if (rc || spawned)
        return rc;
    const char *out_dir = r->s.out_dir;
    if ((rc = s3_data_conf(r, e)) || (rc = open_s3_out_dir(r, e)))
        return rc;
    rc = tr_run_setup(r, e); /* first: it sets the model's shape keys to those trained */
    if (rc)
        return rc;
    const char *stage = r->s.out_dir;
    r->s.out_dir = out_dir; /* the URL is what was set, not the staging directory */
    if (gk_verbosity() >= GK_LOG_NORMAL) {
        fprintf(stderr, "gpt-train: effective config:\n");
        gk_config_print(r->cfg, stderr);
    }
    r->settings_json = gk_config_to_json(r->cfg, e);
    r->s.out_dir = stage;
    if (!r->settings_json)
        return e->code ? e->code : GK_ENOMEM;
    install_signals();
    return r->s.eval_only ? tr_run_eval_only(r, e) : tr_run_train(r, e);
}

int main(int argc, char **argv)
{
    tr_run r;
    memset(&r, 0, sizeof r);
    gk_env_tool_start(&r.env, "gpt-train"); /* the environment, read once here */
    r.stop = &stop_requested;
    r.start_fd = -1;
    gk_err e = {0};
    int verbosity = GK_LOG_NORMAL;
    int rc = gk_config_create(&r.cfg, tr_settings_keys, &r.s, &e);
    if (!rc)
        rc = parse_args(&r, argc, argv, &verbosity, &e);
    gk_log_setup("gpt-train", verbosity);
    if (rc == 0)
        rc = r.plan ? tr_run_plan(&r, &e) : run(&r, argc, argv, &e);
    if (rc < 0 && !r.dist.quiet_error) { /* (else rank 0 says it) before rank 0 waits for */
        gk_error("%s", e.msg);           /* the other ranks to leave its store (tr_run_free) */
        if (r.unfit && gk_verbosity() >= GK_LOG_NORMAL) /* not -q: one line */
            tr_plan_explain(&r, stderr); /* a model that does not fit: the plan, what would */
    }
    if (rc < 0) {
        tr_dist_reported(&r.dist);
        tr_dist_await_report(&r.dist);
    }
    tr_run_free(&r);
    return rc < 0 ? gk_exit_status(rc) : 0;
}
