/* backend.c: what every backend shares, and the fixed layout of gk_ops (backend.h's rule). */
#include "kernels/backend.h"

#include <stddef.h>

#include "common/mem.h"

/* gk_ops's layout, pointer slot by pointer slot (backend.h, above gk_ops): each group's first op
 * and its spares stay where they are. A new op that takes a spare moves the spare's index here
 * by one (and nothing else); a slot inserted elsewhere fails the build, since it would move every
 * slot after it. */
#define GK_OPS_AT(slot, i)                                         \
    _Static_assert(offsetof(gk_ops, slot) == (i) * sizeof(void *), \
                   "gk_ops." #slot " moved (backend.h: new ops take a spare)")
GK_OPS_AT(alloc, 1);
GK_OPS_AT(spare_memory, 11);
GK_OPS_AT(cast, 12);
GK_OPS_AT(spare_cast, 13);
GK_OPS_AT(gemm, 15);
GK_OPS_AT(spare_matmul, 18);
GK_OPS_AT(bias_bwd, 19);
GK_OPS_AT(spare_elementwise, 23);
GK_OPS_AT(encoder_fwd, 25);
GK_OPS_AT(spare_encoder, 27);
GK_OPS_AT(layernorm_fwd, 29);
GK_OPS_AT(spare_layernorm, 32);
GK_OPS_AT(attention_fwd, 34);
GK_OPS_AT(spare_attention, 37);
GK_OPS_AT(xent_fwd, 39);
GK_OPS_AT(spare_classifier, 42);
GK_OPS_AT(sumsq, 43);
GK_OPS_AT(spare_optimizer, 49);
GK_OPS_AT(record_begin, 50);
GK_OPS_AT(spare_graph, 54);
GK_OPS_AT(comm_open, 56);
GK_OPS_AT(spare_comm, 57);
_Static_assert(sizeof(gk_ops) == 59 * sizeof(void *),
               "gk_ops grew at its end (backend.h: new ops take a spare)");

void gk_backend_free(gk_backend *be)
{
    if (be && be->destroy) be->destroy(be);
}

int gk_backend_mem_info(gk_backend *be, size_t *free_bytes, size_t *total_bytes, const char **bound,
                        gk_err *err)
{
    int rc = be->ops->mem_info(be, free_bytes, total_bytes, err);
    if (rc) return rc;
    if (bound) *bound = NULL;
    if (!be->props.host_memory) return 0;
    gk_host_mem h;
    gk_host_mem_read(&h);
    /* the backend's own figure is mostly the host's MemAvailable read a moment before (cpu, ref,
     * the emulator): one within 1/32 of the host's is that same limit, which is named, not a
     * tighter one of the device's (the two readings once differed and the name was lost) */
    if (h.avail <= *free_bytes + *free_bytes / 32) {
        *free_bytes = h.avail < *free_bytes ? h.avail : *free_bytes;
        if (bound) *bound = h.bound;
    }
    return 0;
}
