// Distance tiles for CPUs with AVX-512 (Skylake-X and later, Zen 4): 32
// vector registers hold 24 accumulators of a 12-row tile. Two widths: 512-bit
// vectors, and 256-bit vectors using the 32 registers AVX-512VL gives them
// (the AVX2 kernel's traits, distances_vec256.hpp, compiled for this target).
// Zen 4 splits 512-bit operations into two 256-bit halves and runs the
// subtract + FMA pair per element faster on 256-bit vectors (measured about
// 1.4x), so the dispatcher picks the 256-bit tile on AMD CPUs.
#include "distances_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx512f,avx512vl,fma")

namespace vflsec::detail {
namespace {

struct Avx512F32 {
    using T = float;
    using V = __m512;
    static constexpr int L = 16;
    static V zero() { return _mm512_setzero_ps(); }
    static V load(const T* p) { return _mm512_load_ps(p); }
    static V set1(T x) { return _mm512_set1_ps(x); }
    static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
    static V add(V a, V b) { return _mm512_add_ps(a, b); }
    static V sqr_acc(V d, V acc) { return _mm512_fmadd_ps(d, d, acc); }
    static V sqrt(V a) { return _mm512_sqrt_ps(a); }
    static V min(V a, V b) { return _mm512_min_ps(a, b); }
    static V max(V a, V b) { return _mm512_max_ps(a, b); }
    static void store(T* p, V a) { _mm512_store_ps(p, a); }
    static void storeu(T* p, V a) { _mm512_storeu_ps(p, a); }
};

struct Avx512F64 {
    using T = double;
    using V = __m512d;
    static constexpr int L = 8;
    static V zero() { return _mm512_setzero_pd(); }
    static V load(const T* p) { return _mm512_load_pd(p); }
    static V set1(T x) { return _mm512_set1_pd(x); }
    static V sub(V a, V b) { return _mm512_sub_pd(a, b); }
    static V add(V a, V b) { return _mm512_add_pd(a, b); }
    static V sqr_acc(V d, V acc) { return _mm512_fmadd_pd(d, d, acc); }
    static V sqrt(V a) { return _mm512_sqrt_pd(a); }
    static V min(V a, V b) { return _mm512_min_pd(a, b); }
    static V max(V a, V b) { return _mm512_max_pd(a, b); }
    static void store(T* p, V a) { _mm512_store_pd(p, a); }
    static void storeu(T* p, V a) { _mm512_storeu_pd(p, a); }
};

}  // namespace
}  // namespace vflsec::detail

#include "distances_tile.hpp"
#include "distances_vec256.hpp"

namespace vflsec::detail {
extern const TileKernels<float> kTileKernelsAvx512F32 = DistanceTile<Avx512F32, 12, 2>::table("avx512f");
extern const TileKernels<double> kTileKernelsAvx512F64 = DistanceTile<Avx512F64, 12, 2>::table("avx512f");
extern const TileKernels<float> kTileKernelsAvx512VlF32 = DistanceTile<Vec256F32, 12, 2>::table("avx512vl");
extern const TileKernels<double> kTileKernelsAvx512VlF64 = DistanceTile<Vec256F64, 12, 2>::table("avx512vl");
}  // namespace vflsec::detail

#pragma GCC pop_options
#endif
