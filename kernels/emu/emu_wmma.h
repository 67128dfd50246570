/* emu_wmma.h: the nvcuda::wmma subset of the emulator (see kernels/emu/README.md for the whole
 * subset).
 * Owns: fragment<matrix_a|matrix_b, 16,16,16, __nv_bfloat16, row_major|col_major> and
 * fragment<accumulator, 16,16,16, float>, and fill_fragment, load_matrix_sync, store_matrix_sync,
 * mma_sync. As on a GPU each lane holds 8 elements of the 16x16 tile in .x[] in a fixed mapping
 * that kernels must not rely on (elementwise work on .x[] is fine), and load, store and mma are
 * warp collectives: all 32 lanes of a full warp call them, or the launch fails. Neither orders
 * memory between lanes (only __syncwarp does): a load reads the lane's part when the lane gets
 * there, before the others may have written theirs, and a store writes the lane's part only
 * once all lanes are there, so a lane that leaves it may not see the others' part yet. The
 * __syncwarp a kernel needs before a load of what other lanes wrote, and after a store that other
 * lanes read, is thus never hidden. The pointer must
 * be 32-byte aligned and ldm a multiple of 16 bytes, as on a GPU; mma accumulates in fp32. */
#ifndef GK_EMU_WMMA_H
#define GK_EMU_WMMA_H

#include "kernels/emu/emu_bf16.h"
#include "kernels/emu/emu_runtime.h"

namespace gk_emu {
enum WmmaUse { WMMA_A, WMMA_B, WMMA_ACC };
/* The lane's part of a load, then a warp collective that all 32 lanes must reach; a store's
 * collective comes first, then the lane's part (see above: neither orders memory between lanes). */
GK_EMU_API void wmma_load(int use, bool col_major, void *x, const void *p, unsigned ldm);
GK_EMU_API void wmma_store(float *p, const float *x, unsigned ldm, bool col_major);
/* d = a b + c over the 32 lanes' fragments (each lane passes its own). */
GK_EMU_API void wmma_mma(float *d, const __nv_bfloat16 *a, const __nv_bfloat16 *b, const float *c);
} // namespace gk_emu

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class T, int Size> struct __frag_base {
    T x[Size];
    enum { num_elements = Size };
    typedef T element_type;
    typedef T storage_element_type;
};
template <class Use, int M, int N, int K, class T, class Layout = void> class fragment;
template <>
class fragment<matrix_a, 16, 16, 16, __nv_bfloat16, row_major>
    : public __frag_base<__nv_bfloat16, 8>
{
};
template <>
class fragment<matrix_a, 16, 16, 16, __nv_bfloat16, col_major>
    : public __frag_base<__nv_bfloat16, 8>
{
};
template <>
class fragment<matrix_b, 16, 16, 16, __nv_bfloat16, row_major>
    : public __frag_base<__nv_bfloat16, 8>
{
};
template <>
class fragment<matrix_b, 16, 16, 16, __nv_bfloat16, col_major>
    : public __frag_base<__nv_bfloat16, 8>
{
};
template <> class fragment<accumulator, 16, 16, 16, float> : public __frag_base<float, 8> {};

template <class L> struct gk_is_col_major { static constexpr bool value = false; };
template <> struct gk_is_col_major<col_major> { static constexpr bool value = true; };

template <class Use, int M, int N, int K, class T, class L>
inline void fill_fragment(fragment<Use, M, N, K, T, L> &f,
                          const typename fragment<Use, M, N, K, T, L>::element_type &v)
{
    for (int i = 0; i < f.num_elements; i++) f.x[i] = v;
}
template <class L>
inline void load_matrix_sync(fragment<matrix_a, 16, 16, 16, __nv_bfloat16, L> &f,
                             const __nv_bfloat16 *p, unsigned ldm)
{
    gk_emu::wmma_load(gk_emu::WMMA_A, gk_is_col_major<L>::value, f.x, p, ldm);
}
template <class L>
inline void load_matrix_sync(fragment<matrix_b, 16, 16, 16, __nv_bfloat16, L> &f,
                             const __nv_bfloat16 *p, unsigned ldm)
{
    gk_emu::wmma_load(gk_emu::WMMA_B, gk_is_col_major<L>::value, f.x, p, ldm);
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p,
                             unsigned ldm, layout_t layout)
{
    gk_emu::wmma_load(gk_emu::WMMA_ACC, layout == mem_col_major, f.x, p, ldm);
}
inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f,
                              unsigned ldm, layout_t layout)
{
    gk_emu::wmma_store(p, f.x, ldm, layout == mem_col_major);
}
template <class LA, class LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                     const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB> &b,
                     const fragment<accumulator, 16, 16, 16, float> &c)
{
    gk_emu::wmma_mma(d.x, a.x, b.x, c.x);
}
} // namespace wmma
} // namespace nvcuda

#endif
