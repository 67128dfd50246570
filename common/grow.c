/* grow.c: growable arrays (see grow.h). */
#include "common/grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"

int gk_grow_cap(size_t cap, size_t need, size_t elem, size_t first, size_t *out)
{
    size_t c = cap ? cap : (first ? first : 1);
    while (c < need) {
        if (c > SIZE_MAX / 2) return GK_ENOMEM;
        c *= 2;
    }
    if (elem && c > SIZE_MAX / elem) return GK_ENOMEM;
    *out = c;
    return 0;
}

int gk_grow(void *pp, size_t *cap, size_t need, size_t elem, size_t first)
{
    void *p, *np;
    size_t c;
    memcpy(&p, pp, sizeof p); /* pp holds a T *: read and written as bytes, not as a void * */
    if (p && need <= *cap) return 0;
    if (gk_grow_cap(*cap, need, elem, first, &c)) return GK_ENOMEM;
    size_t bytes = c * elem;
    if (!(np = realloc(p, bytes ? bytes : 1))) return GK_ENOMEM;
    memcpy(pp, &np, sizeof np);
    *cap = c;
    return 0;
}
