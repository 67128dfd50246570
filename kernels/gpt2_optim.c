/* gpt2_optim.c: zero_grad, global gradient norm, clipping and AdamW over the parameter table. */
#include <math.h>

#include "kernels/gpt2_internal.h"

void gk_gpt2_zero_grad(gk_gpt2 *m)
{
    m->be->ops->zero(m->be, m->g_block, m->n_floats * sizeof(float));
}

/* Padded rows and alignment gaps hold zero gradients, so the whole block can be summed at once. */
double gk_gpt2_grad_norm(gk_gpt2 *m)
{
    double s = 0;
    m->be->ops->sumsq(m->be, &s, m->g_block, m->n_floats);
    return sqrt(s);
}

int gk_gpt2_update(gk_gpt2 *m, const gk_adamw *h, float lr, double *grad_norm, gk_err *err)
{
    (void)err;
    gk_backend *be = m->be;
    double norm = gk_gpt2_grad_norm(m);
    if (grad_norm) *grad_norm = norm;
    /* torch.nn.utils.clip_grad_norm_: coef = max_norm / (norm + 1e-6), clamped to <= 1 */
    float scale = 1.0f;
    if (h->grad_clip > 0) {
        float coef = (float)(h->grad_clip / (norm + 1e-6));
        scale = coef < 1.0f ? coef : 1.0f;
    }
    m->step++;
    for (int i = 0; i < m->n_params; i++) {
        const gk_param *p = &m->params[i];
        /* numel is logical: wte's padded rows (zero, zero grads) are left alone */
        be->ops->adamw(be, p->data, p->grad, p->m, p->v, p->numel, lr, h->beta1, h->beta2, h->eps,
                       p->decay ? h->weight_decay : 0.0f, (int)m->step, scale);
    }
    return 0;
}
