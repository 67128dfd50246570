/* verify.c: gpt-ckpt verify: checks checkpoints explicitly: the header, every tensor's size and
 * place, and every tensor's checksum (safetensors_sum.c). One line per file: "FILE: ok (...)" on
 * stdout, or the error on stderr; the status is 1 when any file is bad. */
#include <stdio.h>
#include <sys/stat.h>

#include "ck.h"
#include "common/log.h"
#include "common/opt.h"
#include "common/io/ckpt.h"
#include "common/io/safetensors.h"

/* Verifies one file and prints its line; 0 or the error code (e filled, not printed). */
static int verify_one(const char *path, const gk_env *env, gk_err *e)
{
    gk_st_file *f = NULL;
    int verified = 0;
    long long bytes = -1;
    struct stat st;
    int rc = ck_st_open(path, env, &f, &bytes, e);
    if (rc == 0 && bytes < 0 && stat(path, &st) == 0)
        bytes = (long long)st.st_size;
    if (rc == 0)
        rc = gk_ckpt_check_version(f, e);
    if (rc == 0)
        rc = gk_st_verify(f, &verified, e);
    if (rc == 0)
        printf("%s: ok (%zu tensors, %lld bytes)%s\n", path, gk_st_count(f), bytes,
               verified ? "" : "; no checksums (written before gptkit 0.1.0): data not verified");
    gk_st_close(f);
    return rc;
}

static const char usage[] =
    "gpt-ckpt verify [options] FILE...\n"
    "Checks each checkpoint: its header, the size and place of every tensor, and every\n"
    "tensor's checksum. Prints \"FILE: ok (N tensors, M bytes)\" or the error; exit status 1\n"
    "when any file is bad.";

int ck_verify_main(int argc, char **argv, const gk_env *env, gk_err *e)
{
    ck_args a = {0};
    const gk_opt tab[] = {
        CK_OPT_QUIET(a),
        CK_OPT_END,
    };
    int first, rc = gk_opt_parse_main(tab, "gpt-ckpt", usage, NULL, argc, argv, &first, e);
    if (rc)
        return rc;
    gk_log_setup("gpt-ckpt", a.quiet ? GK_LOG_QUIET : GK_LOG_NORMAL);
    if (first >= argc)
        return gk_errf(e, GK_EUSAGE, "verify takes one or more checkpoints; see --help");
    int worst = 0;
    for (int i = first; i < argc; i++) {
        gk_err one = {0};
        int r = verify_one(argv[i], env, &one);
        if (r) {
            gk_error("%s", one.msg);
            worst = r;
        }
    }
    if (worst)
        e->msg[0] = '\0'; /* each error is printed above */
    return worst;
}
