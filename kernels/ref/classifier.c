/* classifier.c: the reference softmax + cross-entropy over the vocabulary, forward (loss and
 * log-sum-exp per row) and backward. */
#include "kernels/ref/ref_internal.h"

#include <math.h>

// logits (N,Vp), targets (N) -> losses (N), lse (N)
void gk_ref_xent_fwd(gk_backend *be, float *losses, float *lse, const void *logits_,
                     const int *targets, int N, int V, int Vp)
{
    const float *logits = logits_;
    (void)be;
    for (int i = 0; i < N; i++) {
        const float *l = logits + (size_t)i * Vp;
        double mx = -INFINITY, s = 0;
        for (int j = 0; j < V; j++) mx = l[j] > mx ? l[j] : mx;
        for (int j = 0; j < V; j++) s += exp(l[j] - mx);
        double z = mx + log(s);
        lse[i] = (float)z;
        losses[i] = targets[i] >= 0 ? (float)(z - l[targets[i]]) : 0.0f;
    }
}

// -> dlogits (N,Vp) =
void gk_ref_xent_bwd(gk_backend *be, void *dlogits_, const void *logits_, const float *lse,
                     const int *targets, float dloss, int N, int V, int Vp)
{
    float *dlogits = dlogits_;
    const float *logits = logits_;
    (void)be;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < Vp; j++) {
            size_t k = (size_t)i * Vp + j;
            double g = 0;
            if (targets[i] >= 0 && j < V)
                g = (exp((double)logits[k] - lse[i]) - (j == targets[i])) * dloss;
            dlogits[k] = (float)g;
        }
}
