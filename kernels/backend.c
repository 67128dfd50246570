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
GK_OPS_AT(cast, 13);
GK_OPS_AT(spare_cast, 14);
GK_OPS_AT(gemm, 16);
GK_OPS_AT(spare_matmul, 20);
GK_OPS_AT(bias_bwd, 22);
GK_OPS_AT(spare_elementwise, 26);
GK_OPS_AT(encoder_fwd, 28);
GK_OPS_AT(spare_encoder, 30);
GK_OPS_AT(layernorm_fwd, 32);
GK_OPS_AT(spare_layernorm, 35);
GK_OPS_AT(attention_fwd, 37);
GK_OPS_AT(spare_attention, 40);
GK_OPS_AT(xent_fwd, 42);
GK_OPS_AT(spare_classifier, 45);
GK_OPS_AT(sumsq, 47);
GK_OPS_AT(spare_optimizer, 53);
GK_OPS_AT(record_begin, 55);
GK_OPS_AT(spare_graph, 59);
GK_OPS_AT(comm_open, 61);
GK_OPS_AT(spare_comm, 62);
_Static_assert(sizeof(gk_ops) == 64 * sizeof(void *),
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
