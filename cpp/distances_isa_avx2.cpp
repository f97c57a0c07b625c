// Distance tiles for CPUs with AVX2 and FMA (Haswell and later, Zen 1-3): 16
// vector registers hold a 6-row x 16-column float tile (6 x 8 double).
#include "distances_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma")

namespace vflsec::detail {
namespace {

struct Avx2F32 {
    using T = float;
    using V = __m256;
    static constexpr int L = 8;
    static V zero() { return _mm256_setzero_ps(); }
    static V load(const T* p) { return _mm256_load_ps(p); }
    static V set1(T x) { return _mm256_set1_ps(x); }
    static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
    static V add(V a, V b) { return _mm256_add_ps(a, b); }
    static V sqr_acc(V d, V acc) { return _mm256_fmadd_ps(d, d, acc); }
    static V sqrt(V a) { return _mm256_sqrt_ps(a); }
    static V min(V a, V b) { return _mm256_min_ps(a, b); }
    static V max(V a, V b) { return _mm256_max_ps(a, b); }
    static void store(T* p, V a) { _mm256_store_ps(p, a); }
    static void storeu(T* p, V a) { _mm256_storeu_ps(p, a); }
};

struct Avx2F64 {
    using T = double;
    using V = __m256d;
    static constexpr int L = 4;
    static V zero() { return _mm256_setzero_pd(); }
    static V load(const T* p) { return _mm256_load_pd(p); }
    static V set1(T x) { return _mm256_set1_pd(x); }
    static V sub(V a, V b) { return _mm256_sub_pd(a, b); }
    static V add(V a, V b) { return _mm256_add_pd(a, b); }
    static V sqr_acc(V d, V acc) { return _mm256_fmadd_pd(d, d, acc); }
    static V sqrt(V a) { return _mm256_sqrt_pd(a); }
    static V min(V a, V b) { return _mm256_min_pd(a, b); }
    static V max(V a, V b) { return _mm256_max_pd(a, b); }
    static void store(T* p, V a) { _mm256_store_pd(p, a); }
    static void storeu(T* p, V a) { _mm256_storeu_pd(p, a); }
};

}  // namespace
}  // namespace vflsec::detail

#include "distances_tile.hpp"

namespace vflsec::detail {
extern const TileKernels<float> kTileKernelsAvx2F32 = DistanceTile<Avx2F32, 6, 2>::table("avx2");
extern const TileKernels<double> kTileKernelsAvx2F64 = DistanceTile<Avx2F64, 6, 2>::table("avx2");
}  // namespace vflsec::detail

#pragma GCC pop_options
#endif
