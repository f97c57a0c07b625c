// Distance tiles for CPUs with AVX2 and FMA (Haswell and later, Zen 1-3): 16
// vector registers hold a 6-row x 16-column float tile (6 x 8 double).
#include "distances_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#pragma GCC push_options
#pragma GCC target("avx2,fma")

#include "distances_vec256.hpp"
#include "distances_tile.hpp"

namespace vflsec::detail {
extern const TileKernels<float> kTileKernelsAvx2F32 = DistanceTile<Vec256F32, 6, 2>::table("avx2");
extern const TileKernels<double> kTileKernelsAvx2F64 = DistanceTile<Vec256F64, 6, 2>::table("avx2");
}  // namespace vflsec::detail

#pragma GCC pop_options
#endif
