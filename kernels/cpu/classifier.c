/* classifier.c: the CPU backend's softmax + cross-entropy over the vocabulary, forward (loss
 * and log-sum-exp per row) and backward, a row per task. References: kernels/ref/classifier.c */
#include "kernels/cpu/cpu_ops.h"

#include <math.h>
#include <omp.h>

#include "kernels/cpu/cpu_internal.h"

GK_CLONES static float row_lse(const float *restrict l, int V)
{
    float mx = cpu_row_max(l, V), s[CPU_LANES] = {0};
    int V16 = V / CPU_LANES * CPU_LANES;
    for (int j0 = 0; j0 < V16; j0 += CPU_LANES)
#pragma omp simd
        for (int j = 0; j < CPU_LANES; j++) s[j] += gk_vexpf(l[j0 + j] - mx);
    for (int j = V16; j < V; j++) s[j - V16] += gk_vexpf(l[j] - mx);
    return mx + logf(cpu_lanes_sum(s));
}

// logits (N,Vp), targets (N) -> losses (N), lse (N)
void gk_cpu_xent_fwd(gk_backend *be, float *losses, float *lse, const void *logits_,
                     const int *targets, int N, int V, int Vp)
{
    const float *logits = logits_;
#pragma omp parallel for NT(be) schedule(static)
    for (int i = 0; i < N; i++) {
        const float *l = logits + (size_t)i * Vp;
        float z = row_lse(l, V);
        lse[i] = z;
        losses[i] = targets[i] >= 0 ? z - l[targets[i]] : 0.0f;
    }
}

GK_CLONES static void xent_bwd_row(float *dl, const float *l, float z, int tgt, float dloss, int V,
                                   int Vp)
{
    if (tgt < 0) {
        for (int j = 0; j < Vp; j++) dl[j] = 0.0f;
        return;
    }
#pragma omp simd
    for (int j = 0; j < V; j++) dl[j] = gk_vexpf(l[j] - z) * dloss;
    for (int j = V; j < Vp; j++) dl[j] = 0.0f;
    if (tgt < V) dl[tgt] -= dloss; /* (else another vocabulary slice's: the softmax alone) */
}

// -> dlogits (N,Vp) = (softmax - onehot) * dloss
void gk_cpu_xent_bwd(gk_backend *be, void *dlogits_, const void *logits_, const float *lse,
                     const int *targets, float dloss, int N, int V, int Vp)
{
    float *dlogits = dlogits_;
    const float *logits = logits_;
#pragma omp parallel for NT(be) schedule(static)
    for (int i = 0; i < N; i++)
        xent_bwd_row(dlogits + (size_t)i * Vp, logits + (size_t)i * Vp, lse[i], targets[i], dloss,
                     V, Vp);
}
