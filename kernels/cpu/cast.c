/* cast.c: the CPU backend's element type conversion (gk_ops.cast). References:
 * kernels/ref/cast.c */
#include "kernels/cpu/cpu_ops.h"

#include <omp.h>

#include "kernels/bf16.h"
#include "kernels/cpu/cpu_internal.h"

void gk_cpu_cast(gk_backend *be, void *dst, gk_elt dt, const void *src, gk_elt st, size_t n)
{
    (void)be;
    if (dt == st) {
        memmove(dst, src, n * gk_elt_size(dt));
        return;
    }
    for (size_t i = 0; i < n; i++) gk_elt_put(dst, dt, i, gk_elt_get(src, st, i));
}
