// SIMD traits of 256-bit vectors with FMA (the interface distances_tile.hpp
// expects), used by two tile kernels: the AVX2 one (16 registers) and the
// AVX-512VL one (the same instructions, 32 registers). Include this header
// only from distances_isa_avx2.cpp and distances_isa_avx512.cpp, after their
// target pragma: it lives in an anonymous namespace so that each gets its own
// copy compiled for its own target.
#pragma once

#include <immintrin.h>

namespace vflsec::detail {
namespace {

struct Vec256F32 {
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

struct Vec256F64 {
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
