/* cast.c: the reference element type conversion (any gk_elt to any). */
#include "kernels/ref/ref_internal.h"

#include "kernels/bf16.h"

void gk_ref_cast(gk_backend *be, void *dst, gk_elt td, const void *src, gk_elt ts, size_t n)
{
    (void)be;
    for (size_t i = 0; i < n; i++) gk_elt_put(dst, td, i, gk_elt_get(src, ts, i));
}
