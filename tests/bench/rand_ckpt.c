/* rand_ckpt.c: writes a GPT-2 checkpoint with nanoGPT's random init (gk_gpt2_init), for the
 * sampling benchmarks (speed does not depend on the weights' values). Links the real libraries.
 * Usage: rand_ckpt OUT.safetensors [n_layer n_head n_embd block_size vocab_size]
 *        (default GPT-2 124M: 12 12 768 1024 50257, with biases) */
#include <stdio.h>
#include <stdlib.h>

#include "common/io/ckpt.h"
#include "kernels/cpu/cpu.h"
#include "kernels/model/gpt2_load.h"

int main(int argc, char **argv)
{
    gk_gpt2_config cfg = {12, 12, 768, 1024, 50257, 1, 0.0f};
    if (argc != 2 && argc != 7) {
        fprintf(stderr, "usage: rand_ckpt OUT [n_layer n_head n_embd block_size vocab_size]\n");
        return 2;
    }
    if (argc == 7) {
        int *f[] = {&cfg.n_layer, &cfg.n_head, &cfg.n_embd, &cfg.block_size, &cfg.vocab_size};
        for (int i = 0; i < 5; i++) *f[i] = (int)strtol(argv[2 + i], NULL, 10);
    }
    gk_err e = {0};
    gk_backend *be = NULL;
    gk_gpt2 *m = NULL;
    gk_ckpt_param *p = NULL;
    char *json = NULL;
    int rc = gk_cpu_create(&be, 0, &e);
    if (!rc) rc = gk_gpt2_create_ex(&m, &cfg, be, 1, 1, GK_GPT2_INFERENCE, &e);
    if (!rc) rc = gk_gpt2_init(m, 1337, &e);
    if (!rc) {
        int n = gk_gpt2_n_params(m);
        p = calloc((size_t)n, sizeof *p);
        json = gk_gpt2_config_json(&cfg);
        for (int i = 0; p && i < n; i++) {
            const gk_param *t = gk_gpt2_param(m, i);
            p[i] = (gk_ckpt_param){t->name, t->ndim, {t->shape[0], t->ndim > 1 ? t->shape[1] : 0},
                                   t->data, NULL, NULL};
        }
        gk_ckpt_info info = {json, NULL, NULL, 0, NULL, NULL};
        rc = !p || !json ? gk_errf(&e, GK_ENOMEM, "out of memory")
                         : gk_ckpt_save(argv[1], p, (size_t)n, &info, &e);
    }
    if (rc) fprintf(stderr, "rand_ckpt: %s\n", e.msg);
    free(p);
    free(json);
    gk_gpt2_free(m);
    gk_backend_free(be);
    return rc ? 1 : 0;
}
