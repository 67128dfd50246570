/* encoder.c: the reference token + position embedding, forward and backward (with the
 * embedding dropout). */
#include "kernels/ref/ref_internal.h"

#include "kernels/bf16.h"
#include "kernels/rng.h"

// tokens (B,T) -> out (B,T,C)
void gk_ref_encoder_fwd(gk_backend *be, void *out_, const int *tok, const void *wte,
                        gk_elt tw, const float *wpe, const int *t0, int B, int T, int C,
                        float p, uint64_t key)
{
    float *out = out_;
    (void)be;
    if (t0) wpe += (size_t)*t0 * C;
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)bt * C + c;
            float x = gk_elt_get(wte, tw, (size_t)tok[bt] * C + c) + wpe[(size_t)(bt % T) * C + c];
            out[i] = p > 0 ? x * gk_rng_dropout(key, i, p) : x;
        }
}

// dout (B,T,C) -> dwte (V,C) +=, dwpe (T,C) +=
void gk_ref_encoder_bwd(gk_backend *be, float *dwte, float *dwpe, const void *dout_,
                        const int *tok, int B, int T, int C, float p, uint64_t key)
{
    const float *dout = dout_;
    (void)be;
    for (int bt = 0; bt < B * T; bt++)
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)bt * C + c;
            float d = p > 0 ? dout[i] * gk_rng_dropout(key, i, p) : dout[i];
            dwte[(size_t)tok[bt] * C + c] += d;
            dwpe[(size_t)(bt % T) * C + c] += d;
        }
}
