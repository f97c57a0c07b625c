// Function qualifiers for code shared by the CPU kernels (g++) and the CUDA
// kernels (nvcc): chacha20_block.hpp and box_muller.hpp.
//   VFLSEC_HD: __host__ __device__ and force-inlined under nvcc; under g++ a
//              plain always-inline function (so that the SIMD lane loops of
//              cpp/noise.cpp vectorize through it).
//   VFLSEC_ALWAYS_INLINE: an always-inline host function.
#pragma once

#define VFLSEC_ALWAYS_INLINE inline __attribute__((always_inline))

#if defined(__CUDACC__)
#define VFLSEC_HD __host__ __device__ __forceinline__
#else
#define VFLSEC_HD VFLSEC_ALWAYS_INLINE
#endif
