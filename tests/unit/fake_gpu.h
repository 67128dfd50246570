/* fake_gpu.h: a device for the tests of memory checks (header-only, like test.h): the reference
 * backend under the ops table of a GPU named "cuda" ("cuda (Fake GPU, bf16)" in messages, a GPU's
 * props: no host memory, recompute 1) that
 * reports fake_gpu_free bytes free of twice that. One per test binary; not thread-safe. */
#ifndef GK_FAKE_GPU_H
#define GK_FAKE_GPU_H

#include <stdio.h>

#include "kernels/backend.h"
#include "kernels/ref/ref.h"

static size_t fake_gpu_free;
static gk_ops fake_gpu_ops; /* a test may change it: another name */

static int fake_gpu_mem_info(gk_backend *be, size_t *free_bytes, size_t *total_bytes, gk_err *e)
{
    (void)be, (void)e;
    *free_bytes = fake_gpu_free;
    *total_bytes = 2 * fake_gpu_free;
    return 0;
}

/* The fake GPU (free it with gk_backend_free), or NULL with e set. */
static gk_backend *fake_gpu_open(gk_err *e)
{
    gk_backend *be = NULL;
    if (gk_ref_create(&be, e) != 0) return NULL;
    fake_gpu_ops = gk_ref_ops;
    fake_gpu_ops.name = "cuda", fake_gpu_ops.mem_info = fake_gpu_mem_info;
    be->ops = &fake_gpu_ops;
    be->props = (gk_backend_props){.kind = GK_KIND_CUDA, .device = "Fake GPU", .recompute = 1};
    /* props.host_memory 0: a GPU, only its own memory counts (a test may set it) */
    snprintf(be->what, sizeof be->what, "cuda (Fake GPU, bf16)");
    return be;
}

#endif
