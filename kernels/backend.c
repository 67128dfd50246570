/* backend.c: what every backend shares. */
#include "kernels/backend.h"

void gk_backend_free(gk_backend *be)
{
    if (be && be->destroy) be->destroy(be);
}
