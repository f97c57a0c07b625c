// Exact pairwise Euclidean distances and fused distance statistics.
//
// Distances are computed directly as sqrt(sum_k (y_k - x_k)^2) by a
// register-blocked SIMD kernel, never through the ||x||^2 + ||y||^2 - 2<x,y>
// expansion: the expansion cancels catastrophically for data far from the
// origin, while the direct form keeps a small relative error on any input and
// gives exactly 0 for identical rows.
#pragma once
#include <cstddef>
#include <cstdint>

namespace vflsec {

// out[i * m + j] = ||X[i] - Y[j]|| (squared when `squared`). X is n x d and Y
// is m x d, both row-major; out is n x m, row-major. Requires n, m, d >= 1.
template <typename T>
void pairwise_distances(const T* X, std::size_t n, const T* Y, std::size_t m, std::size_t d,
                        bool squared, T* out);

struct DistanceStatsResult {
    std::uint64_t count;  // n (n - 1) / 2
    double mean;
    double std;  // population standard deviation (ddof = 0)
    double min;
    double max;
};

// Statistics of ||X[j] - X[k]|| over all pairs j < k without materialising
// them. The result does not depend on the thread count: work is cut into a
// fixed set of tiles whose partial moments are merged in a fixed order.
// Requires n >= 2, d >= 1.
template <typename T>
DistanceStatsResult pairwise_distance_stats(const T* X, std::size_t n, std::size_t d);

// The tile kernels' ISA path is isa::distances_family()'s (isa_dispatch.hpp):
// "avx512f" (512-bit vectors), "avx512vl" (256-bit vectors in the 32 AVX-512
// registers; preferred on AMD), "avx2" or "baseline".

}  // namespace vflsec
