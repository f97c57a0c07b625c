// Exact pairwise distances and fused distance statistics on the GPU.
//
// The same arithmetic as the CPU kernels (cpp/distances_tile.hpp): each
// squared distance is sum_k (y_k - x_k)^2 over explicit differences, never
// ||x||^2 + ||y||^2 - 2<x, y>, accumulated in chunks of 256 coordinates that
// are folded into a running total. Identical rows give exactly 0 and every
// distance keeps a small relative error wherever the data sit. Each thread
// computes a 4 x 4 tile of distances from rows read through the L1 cache (no
// shared memory): simple rather than peak speed.
//
// Statistics: each thread reduces the pairs j < k of one row group against
// one column range to moments (count, mean, sum of squared deviations, min,
// max), two-pass per tile and merged with Chan et al.'s update as on the CPU;
// the per-thread moments are then merged in fixed groups of 256, level by
// level. The work layout depends on n only, so the result is deterministic.
#include <cmath>

#include "api.hpp"
#include "exec.cuh"

namespace vflsec::cuda {
namespace {

constexpr std::size_t kTile = 4;          // rows and columns per thread
constexpr std::size_t kChunk = 256;       // coordinates per partial sum, as on the CPU
constexpr std::size_t kMergeGroup = 256;  // moments merged by one thread per level
// Statistics work items (row group x column range) aimed for: enough threads
// to fill a GPU, few enough that their moments take at most ~40 MiB.
constexpr std::size_t kStatsItems = std::size_t(1) << 20;

struct Moments {  // all doubles: the workspace is a float64 tensor
    double count;
    double mean;
    double m2;
    double min;
    double max;
};

VFLSEC_HD void merge_moments(Moments& a, const Moments& b) {
    if (b.count == 0.0) return;
    if (a.count == 0.0) {
        a = b;
        return;
    }
    const double n = a.count + b.count;
    const double delta = b.mean - a.mean;
    a.mean += delta * (b.count / n);
    a.m2 += b.m2 + delta * delta * (a.count * b.count / n);
    a.count = n;
    if (b.min < a.min) a.min = b.min;
    if (b.max > a.max) a.max = b.max;
}

template <typename T, bool kScaled>
VFLSEC_HD T load_scaled(const T* p, int scale_exp) {
    if constexpr (kScaled) {
        return ldexp_of(*p, -scale_exp);  // exact power-of-two scaling
    } else {
        return *p;
    }
}

// Squared distances of rows xr[0..3] to rows yr[0..3] (row pointers already
// clamped into the data; surplus rows repeat the last one).
template <typename T, bool kScaled>
VFLSEC_HD void squared_tile(const T* const (&xr)[kTile], const T* const (&yr)[kTile], std::size_t d, int scale_exp,
                            T (&total)[kTile][kTile]) {
    for (std::size_t r = 0; r < kTile; ++r)
        for (std::size_t c = 0; c < kTile; ++c) total[r][c] = T(0);
    for (std::size_t k0 = 0; k0 < d; k0 += kChunk) {
        const std::size_t k1 = min_of(d, k0 + kChunk);
        T acc[kTile][kTile];
        for (std::size_t r = 0; r < kTile; ++r)
            for (std::size_t c = 0; c < kTile; ++c) acc[r][c] = T(0);
        for (std::size_t k = k0; k < k1; ++k) {
            T xv[kTile], yv[kTile];
            for (std::size_t r = 0; r < kTile; ++r) xv[r] = load_scaled<T, kScaled>(xr[r] + k, scale_exp);
            for (std::size_t c = 0; c < kTile; ++c) yv[c] = load_scaled<T, kScaled>(yr[c] + k, scale_exp);
            for (std::size_t r = 0; r < kTile; ++r)
                for (std::size_t c = 0; c < kTile; ++c) {
                    const T diff = yv[c] - xv[r];
                    acc[r][c] = fma_of(diff, diff, acc[r][c]);
                }
        }
        for (std::size_t r = 0; r < kTile; ++r)
            for (std::size_t c = 0; c < kTile; ++c) total[r][c] += acc[r][c];
    }
}

template <typename T>
VFLSEC_HD void squared_tile_any(const T* const (&xr)[kTile], const T* const (&yr)[kTile], std::size_t d,
                                int scale_exp, T (&total)[kTile][kTile]) {
    if (scale_exp != 0)
        squared_tile<T, true>(xr, yr, d, scale_exp, total);
    else
        squared_tile<T, false>(xr, yr, d, scale_exp, total);
}

template <typename T>
VFLSEC_HD void row_pointers(const T* data, std::size_t rows, std::size_t d, std::size_t first,
                            const T* (&out)[kTile]) {
    for (std::size_t r = 0; r < kTile; ++r) out[r] = data + min_of(first + r, rows - 1) * d;
}

// Threads of one launch block (256 consecutive t) cover 16 x 16 tiles, a
// 64 x 64 block of the output, so that the 128 rows they read stay in the
// L1 cache together.
constexpr std::size_t kGroupSide = 16;
constexpr std::size_t kGroupTiles = kGroupSide * kGroupSide;

// One thread: 4 x 4 output tile (local / 16, local % 16) of tile group
// t / 256 (row-major over the groups), local = t % 256.
template <typename T>
struct DistanceTiles {
    const T* X;
    const T* Y;
    T* out;
    std::size_t n, m, d;
    std::size_t group_cols;  // ceil(ceil(m / 4) / 16)
    int scale_exp;
    bool squared;

    VFLSEC_HD void operator()(std::size_t t) const {
        const std::size_t group = t / kGroupTiles, local = t % kGroupTiles;
        const std::size_t i0 = ((group / group_cols) * kGroupSide + local / kGroupSide) * kTile;
        const std::size_t j0 = ((group % group_cols) * kGroupSide + local % kGroupSide) * kTile;
        if (i0 >= n || j0 >= m) return;  // past the edge of a partial group
        const T* xr[kTile];
        const T* yr[kTile];
        row_pointers(X, n, d, i0, xr);
        row_pointers(Y, m, d, j0, yr);
        T total[kTile][kTile];
        squared_tile_any<T>(xr, yr, d, scale_exp, total);
        const int back = squared ? 2 * scale_exp : scale_exp;
        for (std::size_t r = 0; r < kTile && i0 + r < n; ++r)
            for (std::size_t c = 0; c < kTile && j0 + c < m; ++c) {
                T v = total[r][c];
                if (!squared) v = sqrt_of(v);
                if (scale_exp != 0) v = ldexp_of(v, back);
                out[(i0 + r) * m + (j0 + c)] = v;
            }
    }
};

struct StatsLayout {
    std::size_t row_groups;  // ceil(n / 4)
    std::size_t range_cols;  // columns per range, a multiple of 4
    std::size_t col_ranges;
    std::size_t items;       // row_groups * col_ranges
};

StatsLayout stats_layout(std::size_t n) {
    StatsLayout s;
    s.row_groups = (n + kTile - 1) / kTile;
    // items = row_groups * ceil(n / range_cols) <= about kStatsItems.
    std::size_t cols = (s.row_groups * n + kStatsItems - 1) / kStatsItems;
    if (cols < 64) cols = 64;
    s.range_cols = (cols + kTile - 1) / kTile * kTile;
    s.col_ranges = (n + s.range_cols - 1) / s.range_cols;
    s.items = s.row_groups * s.col_ranges;
    return s;
}

// One thread: moments of the distances (i, j), i < j, for the 4 rows of
// group t / col_ranges against the columns of range t % col_ranges.
template <typename T>
struct DistanceStatsItems {
    const T* X;
    std::size_t n, d;
    std::size_t col_ranges, range_cols;
    int scale_exp;
    Moments* out;

    VFLSEC_HD void operator()(std::size_t t) const {
        const std::size_t i0 = (t / col_ranges) * kTile;
        const std::size_t c_begin = (t % col_ranges) * range_cols;
        const std::size_t c_end = min_of(n, c_begin + range_cols);
        Moments acc{0.0, 0.0, 0.0, 0.0, 0.0};
        const T* xr[kTile];
        row_pointers(X, n, d, i0, xr);
        // Column tiles left of i0 hold no pair j > i; both bounds are multiples of 4.
        for (std::size_t j0 = c_begin > i0 ? c_begin : i0; j0 < c_end; j0 += kTile) {
            const T* yr[kTile];
            row_pointers(X, n, d, j0, yr);
            T dist[kTile][kTile];
            squared_tile_any<T>(xr, yr, d, scale_exp, dist);
            double count = 0.0, sum = 0.0, lo = 0.0, hi = 0.0;
            for (std::size_t r = 0; r < kTile; ++r)
                for (std::size_t c = 0; c < kTile; ++c) {
                    dist[r][c] = sqrt_of(dist[r][c]);
                    if (!(i0 + r < j0 + c && j0 + c < c_end)) continue;  // i < n follows from i < j < n
                    const double v = static_cast<double>(dist[r][c]);
                    lo = (count == 0.0 || v < lo) ? v : lo;
                    hi = (count == 0.0 || v > hi) ? v : hi;
                    sum += v;
                    count += 1.0;
                }
            if (count == 0.0) continue;
            const double mean = sum / count;
            double m2 = 0.0;
            for (std::size_t r = 0; r < kTile; ++r)
                for (std::size_t c = 0; c < kTile; ++c) {
                    if (!(i0 + r < j0 + c && j0 + c < c_end)) continue;
                    const double dev = static_cast<double>(dist[r][c]) - mean;
                    m2 += dev * dev;
                }
            merge_moments(acc, Moments{count, mean, m2, lo, hi});
        }
        out[t] = acc;
    }
};

// One thread: in[t * group, (t + 1) * group) merged in order into out[t].
struct MergeMoments {
    const Moments* in;
    std::size_t count;
    Moments* out;

    VFLSEC_HD void operator()(std::size_t t) const {
        Moments acc{0.0, 0.0, 0.0, 0.0, 0.0};
        const std::size_t end = min_of(count, (t + 1) * kMergeGroup);
        for (std::size_t i = t * kMergeGroup; i < end; ++i) merge_moments(acc, in[i]);
        out[t] = acc;
    }
};

struct FinishStats {
    const Moments* total;
    double* result;

    VFLSEC_HD void operator()(std::size_t) const {
        const Moments s = *total;
        result[0] = s.count;
        result[1] = s.mean;
        result[2] = s.count > 0.0 ? sqrt((s.m2 > 0.0 ? s.m2 : 0.0) / s.count) : 0.0;
        result[3] = s.min;
        result[4] = s.max;
    }
};

template <typename T, class Exec>
void pairwise_distances_run(const Exec& exec, const T* X, std::size_t n, const T* Y, std::size_t m, std::size_t d,
                            bool squared, int scale_exp, T* out) {
    const std::size_t group_rows = ((n + kTile - 1) / kTile + kGroupSide - 1) / kGroupSide;
    const std::size_t group_cols = ((m + kTile - 1) / kTile + kGroupSide - 1) / kGroupSide;
    exec.run(group_rows * group_cols * kGroupTiles,
             DistanceTiles<T>{X, Y, out, n, m, d, group_cols, scale_exp, squared});
}

template <typename T, class Exec>
void pairwise_distance_stats_run(const Exec& exec, const T* X, std::size_t n, std::size_t d, int scale_exp,
                                 double* workspace, double* result) {
    const StatsLayout s = stats_layout(n);
    Moments* level = reinterpret_cast<Moments*>(workspace);
    Moments* spare = level + s.items;
    exec.run(s.items, DistanceStatsItems<T>{X, n, d, s.col_ranges, s.range_cols, scale_exp, level});
    std::size_t count = s.items;
    while (count > 1) {
        const std::size_t next = (count + kMergeGroup - 1) / kMergeGroup;
        exec.run(next, MergeMoments{level, count, spare});
        Moments* t = level;
        level = spare;
        spare = t;
        count = next;
    }
    exec.run(1, FinishStats{level, result});
}

}  // namespace

std::size_t distance_stats_workspace(std::size_t n) {
    const StatsLayout s = stats_layout(n);
    const std::size_t spare = (s.items + kMergeGroup - 1) / kMergeGroup;
    return (s.items + spare) * (sizeof(Moments) / sizeof(double));
}

template <typename T>
void pairwise_distances_device(const T* X, std::size_t n, const T* Y, std::size_t m, std::size_t d, bool squared,
                               int scale_exp, T* out, int device, std::uintptr_t stream) {
    pairwise_distances_run(DeviceExec(device, stream), X, n, Y, m, d, squared, scale_exp, out);
}
template <typename T>
void pairwise_distances_host(const T* X, std::size_t n, const T* Y, std::size_t m, std::size_t d, bool squared,
                             int scale_exp, T* out) {
    pairwise_distances_run(HostExec(), X, n, Y, m, d, squared, scale_exp, out);
}
template <typename T>
void pairwise_distance_stats_device(const T* X, std::size_t n, std::size_t d, int scale_exp, double* workspace,
                                    double* result, int device, std::uintptr_t stream) {
    pairwise_distance_stats_run(DeviceExec(device, stream), X, n, d, scale_exp, workspace, result);
}
template <typename T>
void pairwise_distance_stats_host(const T* X, std::size_t n, std::size_t d, int scale_exp, double* workspace,
                                  double* result) {
    pairwise_distance_stats_run(HostExec(), X, n, d, scale_exp, workspace, result);
}

#define VFLSEC_INSTANTIATE(T)                                                                                       \
    template void pairwise_distances_device<T>(const T*, std::size_t, const T*, std::size_t, std::size_t, bool, int, \
                                               T*, int, std::uintptr_t);                                            \
    template void pairwise_distances_host<T>(const T*, std::size_t, const T*, std::size_t, std::size_t, bool, int,   \
                                             T*);                                                                   \
    template void pairwise_distance_stats_device<T>(const T*, std::size_t, std::size_t, int, double*, double*, int,  \
                                                    std::uintptr_t);                                                \
    template void pairwise_distance_stats_host<T>(const T*, std::size_t, std::size_t, int, double*, double*);
VFLSEC_INSTANTIATE(float)
VFLSEC_INSTANTIATE(double)
#undef VFLSEC_INSTANTIATE

}  // namespace vflsec::cuda
