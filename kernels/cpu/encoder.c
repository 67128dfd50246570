/* encoder.c: the CPU backend's token + position embedding, forward (fp32 or bf16 weights
 * here; fp16 and int8 ones by their matmul_*.c) and backward. References: kernels/ref/encoder.c */
#include "kernels/cpu/cpu_ops.h"

#include <omp.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/matmul.h"
#include "kernels/rng.h"

// tokens (B,T) -> out (B,T,C)
void gk_cpu_encoder_fwd(gk_backend *be, void *out_, const int *tok, const void *wte_, gk_elt tw,
                        const float *wpe, const int *t0, int B, int T, int C, float p, uint64_t key)
{
    float *out = out_;
    const float *wte = wte_;
    if (t0) wpe += (size_t)*t0 * C;
    if (tw != GK_F32) { /* 16-bit and int8 weights are for inference: no dropout */
        if (p > 0) {
            GK_BACKEND_FAIL(be, GK_EUSAGE, "cpu encoder_fwd: dropout with 16-bit or int8 weights");
            return;
        }
        if (tw == GK_F16) gk_cpu_encoder_fwd_f16(be, out, tok, wte_, wpe, B, T, C);
        else if (tw == GK_Q8) gk_cpu_encoder_fwd_q8(be, out, tok, wte_, wpe, B, T, C);
        else gk_cpu_encoder_fwd_bf16(be, out, tok, wte_, wpe, B, T, C);
        return;
    }
#pragma omp parallel for NT(be) schedule(static) ROWS(B * T)
    for (int bt = 0; bt < B * T; bt++) {
        float *o = out + (size_t)bt * C;
        const float *e = wte + (size_t)tok[bt] * C, *q = wpe + (size_t)(bt % T) * C;
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = e[c] + q[c];
        if (p > 0)
            for (int c = 0; c < C; c++) o[c] *= gk_rng_dropout(key, (size_t)bt * C + c, p);
    }
}

// dout (B,T,C) -> dwte (V,C) +=, dwpe (T,C) +=. Threads own column ranges, rows go in order.
void gk_cpu_encoder_bwd(gk_backend *be, float *dwte, float *dwpe, const void *dout_,
                        const int *tok, int B, int T, int C, float p, uint64_t key)
{
    const float *dout = dout_;
    int nb = (C + 63) / 64;
#pragma omp parallel for NT(be) schedule(static)
    for (int cb = 0; cb < nb; cb++) {
        int c0 = cb * 64, c1 = c0 + 64 < C ? c0 + 64 : C;
        for (int bt = 0; bt < B * T; bt++) {
            const float *d = dout + (size_t)bt * C;
            float *we = dwte + (size_t)tok[bt] * C, *wp = dwpe + (size_t)(bt % T) * C;
            for (int c = c0; c < c1; c++) {
                float g = p > 0 ? d[c] * gk_rng_dropout(key, (size_t)bt * C + c, p) : d[c];
                we[c] += g;
                wp[c] += g;
            }
        }
    }
}
