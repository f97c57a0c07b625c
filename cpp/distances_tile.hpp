// Register-blocked distance tiles, written once against a small SIMD traits
// interface and instantiated by each distances_isa_*.cpp under its own
// target. Include this header only from those files, after the target pragma:
// everything here lives in an anonymous namespace so that each instruction
// set gets its own private copy (no ODR merging of AVX-512 code into a
// baseline caller).
//
// Traits S provide: T (element), V (vector of L lanes), zero, load (aligned),
// set1, sub, add, sqr_acc(d, acc) = d * d + acc, sqrt, min, max, store
// (aligned), storeu.
#pragma once
#include "distances_kernels.hpp"

namespace vflsec::detail {
namespace {

// Coordinates per chunk: a squared sum is accumulated over at most this many
// coordinates before being folded into the running total, which bounds the
// float32 rounding error of a squared distance by about (kBlockK + d / kBlockK)
// ulps instead of d: under 1e-5 relative for d up to ~40000 (typical errors
// are ~1e-7). Each chunk costs a round trip of the accumulators through
// memory: 64-coordinate chunks were 8% slower at d = 256.
constexpr std::size_t kBlockK = 256;

template <class S, int R, int NV>
struct DistanceTile {
    using T = typename S::T;
    using V = typename S::V;
    static constexpr int L = S::L;
    static constexpr int P = NV * L;  // columns per panel

    static constexpr std::size_t round_up16(std::size_t x) { return (x + 15) / 16 * 16; }

    // scratch: packed rows (d x R), running sums (R x P per panel of the
    // block), two tiles (R x P).
    static std::size_t scratch_size(std::size_t d, std::size_t max_cols) {
        return round_up16(d * R) + R * round_up16(max_cols + P) + 2 * R * P;
    }
    static T* sums_of(const BlockArgs<T>& a) { return a.scratch + round_up16(a.d * R); }
    static T* tile_of(const BlockArgs<T>& a) { return sums_of(a) + R * round_up16(a.col_end - a.col_begin + P); }

    // Interleave rows [i, i + rows) of X as xp[k * R + r]; missing rows repeat
    // the last one so the kernel never reads past X (their results are dropped).
    static void pack_rows(const T* X, std::size_t d, std::size_t i, std::size_t rows, T* xp) {
        for (int r = 0; r < R; ++r) {
            const std::size_t src = i + (static_cast<std::size_t>(r) < rows ? r : rows - 1);
            const T* x = X + src * d;
            for (std::size_t k = 0; k < d; ++k) xp[k * R + r] = x[k];
        }
    }

    // acc[r][v] += sum over kcount coordinates of (y - x)^2. Subtracting first
    // never cancels: identical rows give exactly 0, nearby rows a small
    // relative error, wherever the data sit.
    static inline __attribute__((always_inline)) void accumulate(const T* xp, const T* yp, std::size_t kcount,
                                                                 V (&acc)[R][NV]) {
        for (std::size_t k = 0; k < kcount; ++k) {
            V y[NV];
#pragma GCC unroll 8
            for (int v = 0; v < NV; ++v) y[v] = S::load(yp + v * L);
#pragma GCC unroll 16
            for (int r = 0; r < R; ++r) {
                const V xb = S::set1(xp[r]);
#pragma GCC unroll 8
                for (int v = 0; v < NV; ++v) acc[r][v] = S::sqr_acc(S::sub(y[v], xb), acc[r][v]);
            }
            xp += R;
            yp += P;
        }
    }

    // Squared distances of the R packed rows xp to every panel (c0 relative
    // to col_begin) for which skip(c0) is false, handed to epilogue(c0, acc).
    // The coordinates go in chunks of kBlockK, each chunk over all panels:
    // the packed rows and a panel chunk stay in L1 whatever d is, and each
    // chunk's partial sums are folded into sums (which also bounds the
    // rounding error, see kBlockK).
    template <class Skip, class Epilogue>
    static inline __attribute__((always_inline)) void for_each_tile(const BlockArgs<T>& a, const T* xp, T* sums,
                                                                    Skip skip, Epilogue epilogue) {
        const std::size_t d = a.d;
        const std::size_t ncols = a.col_end - a.col_begin;
        for (std::size_t k0 = 0; k0 < d; k0 += kBlockK) {
            const std::size_t kc = d - k0 < kBlockK ? d - k0 : kBlockK;
            const bool first = k0 == 0, last = k0 + kc == d;
            for (std::size_t c0 = 0; c0 < ncols; c0 += P) {
                if (skip(c0)) continue;
                V acc[R][NV];
#pragma GCC unroll 16
                for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
                    for (int v = 0; v < NV; ++v) acc[r][v] = S::zero();
                accumulate(xp + k0 * R, a.packed + c0 * d + k0 * P, kc, acc);
                T* s = sums + c0 * R;
                if (!last) {
#pragma GCC unroll 16
                    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
                        for (int v = 0; v < NV; ++v) {
                            T* sv = s + r * P + v * L;
                            S::store(sv, first ? acc[r][v] : S::add(S::load(sv), acc[r][v]));
                        }
                    continue;
                }
                if (!first) {
#pragma GCC unroll 16
                    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
                        for (int v = 0; v < NV; ++v) acc[r][v] = S::add(S::load(s + r * P + v * L), acc[r][v]);
                }
                epilogue(c0, acc);
            }
        }
    }

    static inline __attribute__((always_inline)) void apply_sqrt(V (&acc)[R][NV]) {
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
            for (int v = 0; v < NV; ++v) acc[r][v] = S::sqrt(acc[r][v]);
    }

    // Mirror image of a tile stored earlier: out_t[c * ldo + r] = tile[r * P + c].
    static void write_transposed(const T* tile, T* dst, std::size_t rows, std::size_t cols, std::size_t ldo) {
        if (rows == static_cast<std::size_t>(R) && cols == static_cast<std::size_t>(P)) {
            for (int c = 0; c < P; ++c)
                for (int r = 0; r < R; ++r) dst[c * ldo + r] = tile[r * P + c];
        } else {
            for (std::size_t c = 0; c < cols; ++c)
                for (std::size_t r = 0; r < rows; ++r) dst[c * ldo + r] = tile[r * P + c];
        }
    }

    static void block_distances(const BlockArgs<T>& a, bool squared_out, T* out, std::size_t ldo, T* out_t) {
        T* xp = a.scratch;
        T* sums = sums_of(a);
        T* tiles[2] = {tile_of(a), tile_of(a) + R * P};
        const std::size_t ncols = a.col_end - a.col_begin;
        // A block on the diagonal of a mirrored computation: tiles wholly below
        // the diagonal are the mirror images of tiles above it.
        const bool diagonal = out_t != nullptr && a.row_begin == a.col_begin;
        // Mirror images are written one tile late, after prefetching their
        // scattered destination lines for the time one tile takes to compute.
        int cur = 0;
        T* pending_dst = nullptr;
        std::size_t pending_rows = 0, pending_cols = 0;
        for (std::size_t i = a.row_begin; i < a.row_end; i += R) {
            const std::size_t rows = a.row_end - i < static_cast<std::size_t>(R) ? a.row_end - i : R;
            pack_rows(a.X, a.d, i, rows, xp);
            T* orow = out + (i - a.row_begin) * ldo;
            const auto below_diagonal = [&](std::size_t c0) { return diagonal && a.col_begin + c0 + P <= i; };
            for_each_tile(a, xp, sums, below_diagonal, [&](std::size_t c0, V(&acc)[R][NV]) {
                if (!squared_out) apply_sqrt(acc);
                const std::size_t cols = ncols - c0 < static_cast<std::size_t>(P) ? ncols - c0 : P;
                const bool full = rows == static_cast<std::size_t>(R) && cols == static_cast<std::size_t>(P);
                if (full) {
#pragma GCC unroll 16
                    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
                        for (int v = 0; v < NV; ++v) S::storeu(orow + r * ldo + c0 + v * L, acc[r][v]);
                    if (out_t == nullptr) return;
                }
                T* tile = tiles[cur];
                for (int r = 0; r < R; ++r)
                    for (int v = 0; v < NV; ++v) S::store(tile + r * P + v * L, acc[r][v]);
                if (!full)
                    for (std::size_t r = 0; r < rows; ++r)
                        for (std::size_t c = 0; c < cols; ++c) orow[r * ldo + c0 + c] = tile[r * P + c];
                if (out_t != nullptr) {
                    if (pending_dst != nullptr) write_transposed(tiles[cur ^ 1], pending_dst, pending_rows, pending_cols, ldo);
                    pending_dst = out_t + c0 * ldo + (i - a.row_begin);
                    pending_rows = rows;
                    pending_cols = cols;
                    cur ^= 1;
                    // Its destination is P short pieces of P different rows,
                    // which no hardware prefetcher predicts.
                    for (std::size_t c = 0; c < cols; ++c) {
                        __builtin_prefetch(pending_dst + c * ldo, 1);
                        __builtin_prefetch(pending_dst + c * ldo + rows - 1, 1);
                    }
                }
            });
        }
        if (pending_dst != nullptr) write_transposed(tiles[cur ^ 1], pending_dst, pending_rows, pending_cols, ldo);
    }

    // Moments of a tile whose every entry is a wanted pair: the distances
    // are both in acc and stored in tile. Lane-wise partial sums in double
    // (independent lanes, so the compiler vectorises them without
    // reassociating), then an exact second pass for the squared deviations.
    static inline __attribute__((always_inline)) void reduce_full(const V (&acc)[R][NV], const T* tile,
                                                                  Moments& moments) {
        constexpr int N = R * P;
        constexpr int W = 8;
        static_assert(N % W == 0, "tile size must be a multiple of 8");
        double s[W] = {};
        for (int e = 0; e < N; e += W)
            for (int l = 0; l < W; ++l) s[l] += static_cast<double>(tile[e + l]);
        const double mean = (((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))) / N;
        double q[W] = {};
        for (int e = 0; e < N; e += W)
            for (int l = 0; l < W; ++l) {
                const double dx = static_cast<double>(tile[e + l]) - mean;
                q[l] += dx * dx;
            }
        V lo = acc[0][0], hi = acc[0][0];
        for (int r = 0; r < R; ++r)
            for (int v = 0; v < NV; ++v) {
                lo = S::min(lo, acc[r][v]);
                hi = S::max(hi, acc[r][v]);
            }
        alignas(64) T lo_lanes[L], hi_lanes[L];
        S::store(lo_lanes, lo);
        S::store(hi_lanes, hi);
        T mn = lo_lanes[0], mx = hi_lanes[0];
        for (int l = 1; l < L; ++l) {
            mn = lo_lanes[l] < mn ? lo_lanes[l] : mn;
            mx = hi_lanes[l] > mx ? hi_lanes[l] : mx;
        }
        Moments t;
        t.count = N;
        t.mean = mean;
        t.m2 = ((q[0] + q[1]) + (q[2] + q[3])) + ((q[4] + q[5]) + (q[6] + q[7]));
        t.min = static_cast<double>(mn);
        t.max = static_cast<double>(mx);
        merge_moments(moments, t);
    }

    // Moments of the entries (i0 + r, c0 + c) with row < column, r < rows and
    // column < col_end: tiles on the diagonal or at the edge of X.
    static void reduce_masked(const T* tile, std::size_t i0, std::size_t rows, std::size_t c0, std::size_t col_end,
                              Moments& acc) {
        std::uint64_t count = 0;
        double sum = 0.0, mn = 0.0, mx = 0.0;
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t c = 0; c < static_cast<std::size_t>(P) && c0 + c < col_end; ++c) {
                if (c0 + c <= i0 + r) continue;
                const double x = static_cast<double>(tile[r * P + c]);
                if (count == 0 || x < mn) mn = x;
                if (count == 0 || x > mx) mx = x;
                sum += x;
                ++count;
            }
        if (count == 0) return;
        const double mean = sum / static_cast<double>(count);
        double m2 = 0.0;
        for (std::size_t r = 0; r < rows; ++r)
            for (std::size_t c = 0; c < static_cast<std::size_t>(P) && c0 + c < col_end; ++c) {
                if (c0 + c <= i0 + r) continue;
                const double dx = static_cast<double>(tile[r * P + c]) - mean;
                m2 += dx * dx;
            }
        Moments t;
        t.count = count;
        t.mean = mean;
        t.m2 = m2;
        t.min = mn;
        t.max = mx;
        merge_moments(acc, t);
    }

    // Pairs (i, j), i < j, of the block: rows [row_begin, row_end) of X against
    // the packed columns [col_begin, col_end) (which index the same X).
    static void block_stats(const BlockArgs<T>& a, Moments* moments) {
        T* xp = a.scratch;
        T* sums = sums_of(a);
        T* tile = tile_of(a);
        const std::size_t ncols = a.col_end - a.col_begin;
        for (std::size_t i = a.row_begin; i < a.row_end; i += R) {
            const std::size_t rows = a.row_end - i < static_cast<std::size_t>(R) ? a.row_end - i : R;
            // A panel whose last column is at or left of row i holds no pair j > i.
            const auto skip = [&](std::size_t c0) {
                const std::size_t c_last = a.col_begin + (c0 + P < ncols ? c0 + P : ncols) - 1;
                return c_last <= i;
            };
            if (a.col_end - 1 <= i) continue;
            pack_rows(a.X, a.d, i, rows, xp);
            for_each_tile(a, xp, sums, skip, [&](std::size_t c0, V(&acc)[R][NV]) {
                apply_sqrt(acc);
                for (int r = 0; r < R; ++r)
                    for (int v = 0; v < NV; ++v) S::store(tile + r * P + v * L, acc[r][v]);
                const std::size_t col = a.col_begin + c0;
                if (rows == static_cast<std::size_t>(R) && c0 + P <= ncols && col >= i + R)
                    reduce_full(acc, tile, *moments);
                else
                    reduce_masked(tile, i, rows, col, a.col_end, *moments);
            });
        }
    }

    static constexpr TileKernels<T> table(const char* isa) {
        return TileKernels<T>{isa, R, P, &scratch_size, &block_distances, &block_stats};
    }
};

}  // namespace
}  // namespace vflsec::detail
