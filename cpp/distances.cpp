// Driver for the distance kernels: picks the tile kernels for this CPU, cuts
// the output into cache-sized blocks, packs the right-hand rows into panels and
// runs the blocks on OpenMP threads.
#include "parallel.hpp"
#include "distances.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <vector>

#include "distances_kernels.hpp"
#include "isa_dispatch.hpp"

namespace vflsec {
namespace {

using detail::BlockArgs;
using detail::Moments;
using detail::TileKernels;

// The tile kernels, indexed like the paths of isa::distances_family() (end
// of this file).
#if defined(__x86_64__) || defined(__i386__)
const TileKernels<float>* const kTilesF32[] = {&detail::kTileKernelsBaselineF32, &detail::kTileKernelsAvx2F32,
                                               &detail::kTileKernelsAvx512F32, &detail::kTileKernelsAvx512VlF32};
const TileKernels<double>* const kTilesF64[] = {&detail::kTileKernelsBaselineF64, &detail::kTileKernelsAvx2F64,
                                                &detail::kTileKernelsAvx512F64, &detail::kTileKernelsAvx512VlF64};
#else
const TileKernels<float>* const kTilesF32[] = {&detail::kTileKernelsBaselineF32};
const TileKernels<double>* const kTilesF64[] = {&detail::kTileKernelsBaselineF64};
#endif

template <typename T>
const TileKernels<T>& tile_kernels();

template <>
const TileKernels<float>& tile_kernels<float>() {
    return *isa::distances_family().pick(kTilesF32);
}

template <>
const TileKernels<double>& tile_kernels<double>() {
    return *isa::distances_family().pick(kTilesF64);
}

// Bytes of packed right-hand panels per thread. The kernels stream the
// panels (one coordinate chunk of each at a time) from L2 or L3 while the
// packed left-hand rows stay in L1; larger blocks mean fewer re-packings of
// the left-hand rows (measured on Zen 4: 768 KiB blocks were 3% slower at
// d = 256 and 10% slower at d = 1024 than 2 MiB).
constexpr std::size_t kPackedBytes = 2048 * 1024;

std::size_t ceil_div(std::size_t a, std::size_t b) { return (a + b - 1) / b; }
std::size_t round_up(std::size_t a, std::size_t b) { return ceil_div(a, b) * b; }

// One 64-byte aligned allocation split into per-thread regions.
template <typename T>
class ThreadBuffers {
public:
    ThreadBuffers(int threads, std::size_t elems_per_thread)
        : stride_(round_up(std::max<std::size_t>(elems_per_thread, 1), 64 / sizeof(T))),
          data_(static_cast<T*>(::operator new(stride_ * threads * sizeof(T), std::align_val_t(64)))) {}
    ~ThreadBuffers() { ::operator delete(data_, std::align_val_t(64)); }
    ThreadBuffers(const ThreadBuffers&) = delete;
    ThreadBuffers& operator=(const ThreadBuffers&) = delete;
    T* get(int thread) const { return data_ + stride_ * static_cast<std::size_t>(thread); }

private:
    std::size_t stride_;
    T* data_;
};

// Panels of `lanes` columns of Y rows [col_begin, col_end): see BlockArgs.
template <typename T>
void pack_panels(const T* Y, std::size_t d, std::size_t col_begin, std::size_t col_end, std::size_t lanes,
                 T* packed) {
    const std::size_t ncols = col_end - col_begin;
    const std::size_t npanels = ceil_div(ncols, lanes);
    for (std::size_t p = 0; p < npanels; ++p) {
        T* panel = packed + p * d * lanes;
        for (std::size_t l = 0; l < lanes; ++l) {
            const std::size_t c = p * lanes + l;
            if (c < ncols) {
                const T* y = Y + (col_begin + c) * d;
                for (std::size_t k = 0; k < d; ++k) panel[k * lanes + l] = y[k];
            } else {
                for (std::size_t k = 0; k < d; ++k) panel[k * lanes + l] = T(0);
            }
        }
    }
}

// Below this many coordinate differences a parallel region costs more than it saves.
constexpr double kParallelWork = 1 << 18;

// Smallest multiple of both tile sides: blocks of this granularity need
// masking only at the end of the data.
std::size_t tile_quantum(std::size_t R, std::size_t P) {
    std::size_t q = R;
    while (q % P != 0) q += R;
    return q;
}

// X against itself: only tiles on or above the diagonal are computed, each
// also writing its mirror image. Both halves come out
// bitwise identical to the general path, since (a - b)^2 == (b - a)^2.
template <typename T>
void symmetric_distances(const TileKernels<T>& K, const T* X, std::size_t n, std::size_t d, bool squared, T* out,
                         int max_threads) {
    const std::size_t quantum = tile_quantum(K.rows, K.lanes);
    const std::size_t cache_block = std::max(quantum, kPackedBytes / (d * sizeof(T)) / quantum * quantum);
    // At least 8 blocks a side (36 units) when n allows, to balance the threads.
    const std::size_t block = std::min(cache_block, std::max(quantum, round_up(ceil_div(n, 8), quantum)));
    const std::size_t nb = ceil_div(n, block);
    std::vector<std::pair<std::size_t, std::size_t>> units;  // (row block, column block), column-major
    units.reserve(nb * (nb + 1) / 2);
    for (std::size_t cb = 0; cb < nb; ++cb)
        for (std::size_t rb = 0; rb <= cb; ++rb) units.emplace_back(rb, cb);

    const int threads = static_cast<int>(std::min<std::size_t>(units.size(), static_cast<std::size_t>(max_threads)));
    const std::size_t packed_elems = block * d;
    ThreadBuffers<T> buffers(threads, packed_elems + K.scratch_size(d, block));
    const std::size_t nunits = units.size();

#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        T* packed = buffers.get(omp_get_thread_num());
        T* scratch = packed + packed_elems;
        std::size_t packed_cb = ~std::size_t(0);
#pragma omp for schedule(dynamic, 1)
        for (std::size_t u = 0; u < nunits; ++u) {
            const auto [rb, cb] = units[u];
            const std::size_t c0 = cb * block, c1 = std::min(n, c0 + block);
            if (cb != packed_cb) {
                pack_panels(X, d, c0, c1, K.lanes, packed);
                packed_cb = cb;
            }
            const std::size_t r0 = rb * block, r1 = std::min(n, r0 + block);
            const BlockArgs<T> args{X, d, r0, r1, packed, c0, c1, scratch};
            K.block_distances(args, squared, out + r0 * n + c0, n, out + c0 * n + r0);
        }
    }
}

// Writing a tile's mirror image (scattered short row pieces) costs about as
// much as computing the tile at d = 40 (measured on Zen 4: the mirrored path
// is 13% slower at d = 32, 17% faster at d = 64, 40% faster at d = 256).
constexpr std::size_t kSymmetricMinD = 48;

}  // namespace

template <typename T>
void pairwise_distances(const T* X, std::size_t n, const T* Y, std::size_t m, std::size_t d, bool squared,
                        T* out) {
    const TileKernels<T>& K = tile_kernels<T>();
    const std::size_t R = static_cast<std::size_t>(K.rows);
    const std::size_t P = static_cast<std::size_t>(K.lanes);
    const double work = static_cast<double>(n) * static_cast<double>(m) * static_cast<double>(d);
    const int max_threads = work < kParallelWork ? 1 : vflsec::num_threads();

    // Y holding the same values as X (the same buffer, or a copy: a converted
    // duplicate, X.clone()) gives a symmetric result, computed once per pair.
    // memcmp stops at the first differing byte, so unrelated data cost nothing.
    const bool mirror = n == m && d >= kSymmetricMinD && n > tile_quantum(R, P) &&
                        (X == Y || std::memcmp(X, Y, n * d * sizeof(T)) == 0);
    if (mirror) {
        symmetric_distances(K, X, n, d, squared, out, max_threads);
        return;
    }

    const std::size_t col_block =
        std::min(round_up(m, P), std::max(P, kPackedBytes / (d * sizeof(T)) / P * P));
    const std::size_t ncb = ceil_div(m, col_block);
    // Enough row blocks to keep every thread busy, each at most 20 register tiles tall.
    const std::size_t want_rb = ceil_div(4 * static_cast<std::size_t>(max_threads), ncb);
    const std::size_t row_block = std::min(20 * R, std::max(R, round_up(ceil_div(n, want_rb), R)));
    const std::size_t nrb = ceil_div(n, row_block);
    const std::size_t units = nrb * ncb;

    const int threads = static_cast<int>(std::min<std::size_t>(units, static_cast<std::size_t>(max_threads)));
    const std::size_t packed_elems = col_block * d;
    ThreadBuffers<T> buffers(threads, packed_elems + K.scratch_size(d, col_block));

#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        T* packed = buffers.get(omp_get_thread_num());
        T* scratch = packed + packed_elems;
        std::size_t packed_cb = ~std::size_t(0);
        // Column-block-major order: consecutive units share the packed panels.
#pragma omp for schedule(dynamic, 1)
        for (std::size_t u = 0; u < units; ++u) {
            const std::size_t cb = u / nrb, rb = u % nrb;
            const std::size_t c0 = cb * col_block, c1 = std::min(m, c0 + col_block);
            if (cb != packed_cb) {
                pack_panels(Y, d, c0, c1, P, packed);
                packed_cb = cb;
            }
            const std::size_t r0 = rb * row_block, r1 = std::min(n, r0 + row_block);
            const BlockArgs<T> args{X, d, r0, r1, packed, c0, c1, scratch};
            K.block_distances(args, squared, out + r0 * m + c0, m, nullptr);
        }
    }
}

template <typename T>
DistanceStatsResult pairwise_distance_stats(const T* X, std::size_t n, std::size_t d) {
    const TileKernels<T>& K = tile_kernels<T>();
    const std::size_t R = static_cast<std::size_t>(K.rows);
    const std::size_t P = static_cast<std::size_t>(K.lanes);

    // Square blocks, a multiple of both tile sides so that only tiles on the
    // diagonal or at the end of X need masking. The block size depends on n,
    // d and the instruction set only, never on the thread count, so the
    // merge order of the partial moments (and hence the result) is fixed.
    const std::size_t quantum = tile_quantum(R, P);
    const std::size_t cache_block = std::max(quantum, kPackedBytes / (d * sizeof(T)) / quantum * quantum);
    const std::size_t block = std::min(cache_block, round_up(ceil_div(n, 16), quantum));
    const std::size_t nb = ceil_div(n, block);
    const std::size_t units = nb * (nb + 1) / 2;  // (rb, cb) with rb <= cb, index cb (cb + 1) / 2 + rb

    std::vector<Moments> partial(units);
    const double work = 0.5 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(d);
    const int max_threads = vflsec::num_threads();
    const int threads =
        work < kParallelWork ? 1 : static_cast<int>(std::min<std::size_t>(nb, static_cast<std::size_t>(max_threads)));
    const std::size_t packed_elems = block * d;
    ThreadBuffers<T> buffers(threads, packed_elems + K.scratch_size(d, block));

#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        T* packed = buffers.get(omp_get_thread_num());
        T* scratch = packed + packed_elems;
        // Column blocks hold cb + 1 units: hand out the tallest first.
#pragma omp for schedule(dynamic, 1)
        for (std::size_t t = 0; t < nb; ++t) {
            const std::size_t cb = nb - 1 - t;
            const std::size_t c0 = cb * block, c1 = std::min(n, c0 + block);
            pack_panels(X, d, c0, c1, P, packed);
            for (std::size_t rb = 0; rb <= cb; ++rb) {
                const std::size_t r0 = rb * block, r1 = std::min(n, r0 + block);
                const BlockArgs<T> args{X, d, r0, r1, packed, c0, c1, scratch};
                K.block_stats(args, &partial[cb * (cb + 1) / 2 + rb]);
            }
        }
    }

    Moments total;
    for (const Moments& p : partial) detail::merge_moments(total, p);
    DistanceStatsResult result;
    result.count = total.count;
    result.mean = total.mean;
    result.std = total.count > 0 ? std::sqrt(std::max(0.0, total.m2) / static_cast<double>(total.count)) : 0.0;
    result.min = total.min;
    result.max = total.max;
    return result;
}

template void pairwise_distances<float>(const float*, std::size_t, const float*, std::size_t, std::size_t, bool,
                                        float*);
template void pairwise_distances<double>(const double*, std::size_t, const double*, std::size_t, std::size_t, bool,
                                         double*);
template DistanceStatsResult pairwise_distance_stats<float>(const float*, std::size_t, std::size_t);
template DistanceStatsResult pairwise_distance_stats<double>(const double*, std::size_t, std::size_t);

}  // namespace vflsec

namespace vflsec::isa {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// Both AVX-512 tile kernels are compiled for F + VL + FMA (distances_isa_avx512.cpp).
constexpr Path kDistancePaths[] = {{"baseline", 0},
                                   {"avx2", kAvx2 | kFma},
                                   {"avx512f", kAvx512F | kAvx512Vl | kFma},
                                   {"avx512vl", kAvx512F | kAvx512Vl | kFma}};

// AMD (Zen 4) executes 512-bit operations as two 256-bit halves: the 256-bit
// tiles in the 32 AVX-512 registers run faster there (measured about 1.4x).
int prefer_distance_path(const Family& family, const Cpu& cpu) {
    if (cpu.amd && family.supported(3)) return 3;
    for (int i = 2; i > 0; --i)
        if (family.supported(i)) return i;
    return 0;
}
#else
constexpr Path kDistancePaths[] = {{"baseline", 0}};
int prefer_distance_path(const Family&, const Cpu&) { return 0; }
#endif

}  // namespace

Family& distances_family() {
    static Family family("distances", kDistancePaths, prefer_distance_path);
    return family;
}

}  // namespace vflsec::isa
