/* grow.h: the growable arrays' one rule: capacity doubles (from a first size) until it holds
 * what is needed, with the byte count checked for overflow. Owns nothing: the array is the
 * caller's (free()). Thread-safe (no state). */
#ifndef GK_GROW_H
#define GK_GROW_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The capacity that holds need elements of elem bytes: cap doubled (first when cap is 0) until
 * it does, into *out; 0, or GK_ENOMEM when the count or its bytes overflow a size_t. */
int gk_grow_cap(size_t cap, size_t need, size_t elem, size_t first, size_t *out);

/* Makes the array at *pp (pp is the address of a T *, elem = sizeof(T), *cap its capacity in
 * elements) hold at least need elements, by gk_grow_cap and realloc. 0, or GK_ENOMEM with the
 * array and *cap untouched. A NULL array is allocated even when need is 0. */
int gk_grow(void *pp, size_t *cap, size_t need, size_t elem, size_t first);

#ifdef __cplusplus
}
#endif

#endif
