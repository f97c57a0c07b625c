// Internal interface between the distance driver (distances.cpp: tiling,
// packing, threads) and the per-instruction-set tile kernels
// (distances_isa_*.cpp, each compiled for one target and picked at run time).
#pragma once
#include <cstddef>
#include <cstdint>

namespace vflsec::detail {

// Running moments of a set of values, merged with Chan et al.'s pairwise
// update so that no sum of squares of large numbers is ever formed.
struct Moments {
    std::uint64_t count = 0;
    double mean = 0.0;
    double m2 = 0.0;  // sum of squared deviations from the mean
    double min = 0.0;
    double max = 0.0;
};

inline void merge_moments(Moments& a, const Moments& b) {
    if (b.count == 0) return;
    if (a.count == 0) {
        a = b;
        return;
    }
    const double na = static_cast<double>(a.count);
    const double nb = static_cast<double>(b.count);
    const double n = na + nb;
    const double delta = b.mean - a.mean;
    a.mean += delta * (nb / n);
    a.m2 += b.m2 + delta * delta * (na * nb / n);
    a.count += b.count;
    if (b.min < a.min) a.min = b.min;
    if (b.max > a.max) a.max = b.max;
}

// The right-hand operand Y is packed into panels of `lanes` columns: panel p
// holds d rows of `lanes` values, element (k, l) = Y[col0 + p * lanes + l][k],
// zero-padded past the last column. The left operand is read from X directly.
template <typename T>
struct BlockArgs {
    const T* X;              // row-major, d columns
    std::size_t d;
    std::size_t row_begin;   // rows [row_begin, row_end) of X
    std::size_t row_end;
    const T* packed;         // panels of the columns [col_begin, col_end)
    std::size_t col_begin;
    std::size_t col_end;
    T* scratch;              // thread-local, scratch_size(d, col_end - col_begin) elements, 64-byte aligned
};

template <typename T>
struct TileKernels {
    const char* isa;
    int rows;   // rows of X per register tile
    int lanes;  // columns per packed panel
    std::size_t (*scratch_size)(std::size_t d, std::size_t max_cols);
    // out[(i - row_begin) * ldo + (j - col_begin)] for the block's rows and
    // columns and, unless out_t is null, the mirror image
    // out_t[(j - col_begin) * ldo + (i - row_begin)].
    void (*block_distances)(const BlockArgs<T>& args, bool squared, T* out, std::size_t ldo, T* out_t);
    // Moments of the distances of the block's pairs (i, j) with i < j.
    void (*block_stats)(const BlockArgs<T>& args, Moments* acc);
};

extern const TileKernels<float> kTileKernelsAvx512F32;
extern const TileKernels<double> kTileKernelsAvx512F64;
extern const TileKernels<float> kTileKernelsAvx512VlF32;
extern const TileKernels<double> kTileKernelsAvx512VlF64;
extern const TileKernels<float> kTileKernelsAvx2F32;
extern const TileKernels<double> kTileKernelsAvx2F64;
extern const TileKernels<float> kTileKernelsBaselineF32;
extern const TileKernels<double> kTileKernelsBaselineF64;

}  // namespace vflsec::detail
