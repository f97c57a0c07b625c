// The secure Gaussian release; see lattice_gaussian.hpp for the mechanism,
// the sampler and the stream layout.
#include "lattice_gaussian.hpp"

#include "isa_dispatch.hpp"
#include "parallel.hpp"
#include "secure_zero.hpp"

#include <immintrin.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <stdexcept>
#include <string>

namespace vflsec::noise {

namespace {

using u128 = unsigned __int128;
using Table = LatticeGaussianTable;

constexpr uint64_t kOverflowStreamBit = uint64_t{1} << 63;
constexpr int kThresholdBits = 112;       // column capacity 2^112
constexpr int kTotalBits = kThresholdBits + Table::kItemBits;  // all items: 2^127
constexpr uint64_t kMask20 = (uint64_t{1} << 20) - 1;
constexpr uint64_t kMask14 = (uint64_t{1} << 14) - 1;
constexpr uint64_t kMask15 = (uint64_t{1} << 15) - 1;

// h(z) = integral over u in [-1/2, 1/2] of exp(-(z u) / s^2 - u^2 / (2 s^2)):
// R(z) is proportional to exp(-z^2 / (2 s^2)) h(z). With A = z / s^2,
// B = 1 / (2 s^2) the even terms of the series give 1 + A^2/24 - B/12 +
// A^4/1920 - A^2 B/40 + B^2/160 + ...; for |z| <= 14 s, s >= 2^20 the next
// terms are below 2^-100.
long double h_of(long double z, long double inv_s2, long double inv_two_s2) {
    const long double a = z * inv_s2;
    const long double a2 = a * a;
    return 1.0L + a2 / 24.0L - inv_two_s2 / 12.0L + a2 * a2 / 1920.0L - a2 * inv_two_s2 / 40.0L +
           inv_two_s2 * inv_two_s2 / 160.0L;
}

struct BlockGeometry {
    int64_t lo;     // the block is [lo, lo + width)
    int64_t width;  // kWidth (core) or kTailWidth (tail)
    int64_t z0;     // nearest 0: R is largest here within the block
    int64_t zfar;   // farthest from 0
};

// Items: core blocks [0, 2B) of width kWidth covering [-B W, B W); then K
// positive tail blocks and K negative ones of width kTailWidth beyond.
BlockGeometry geometry(const Table& t, int64_t item) {
    const int64_t core = 2 * t.half_blocks_;
    const int64_t edge = t.half_blocks_ * Table::kWidth;
    if (item < core) {
        const int64_t lo = (item - t.half_blocks_) * Table::kWidth;
        if (lo >= 0) return {lo, Table::kWidth, lo, lo + Table::kWidth - 1};
        return {lo, Table::kWidth, lo + Table::kWidth - 1, lo};
    }
    const int64_t k = item - core;
    if (k < t.tail_blocks_) {
        const int64_t lo = edge + k * Table::kTailWidth;
        return {lo, Table::kTailWidth, lo, lo + Table::kTailWidth - 1};
    }
    const int64_t lo = -edge - (k - t.tail_blocks_ + 1) * Table::kTailWidth;
    return {lo, Table::kTailWidth, lo + Table::kTailWidth - 1, lo};
}

// The block's envelope point: the smallest |z - c| over the block and every
// centre c in [-1/2, 1/2], where R(z - c) peaks.
long double envelope_point(const BlockGeometry& g) {
    const long double z0 = static_cast<long double>(g.z0 >= 0 ? g.z0 : -g.z0);
    return z0 > 0.5L ? z0 - 0.5L : 0.0L;
}

// a_c(z) = kappa R(z - c) / R(p0) for z in the block of `item` (not the reject
// item) and the centre c in [-1/2, 1/2] (the fractional part of x / g).
long double acceptance(const Table& t, int64_t item, int64_t z, long double c) {
    const BlockGeometry g = geometry(t, item);
    const long double u = fabsl(static_cast<long double>(z) - c);
    const long double p0 = envelope_point(g);
    // u^2 - p0^2 as a product of a difference and a sum: no cancellation.
    const long double d = (u - p0) * (u + p0);
    return t.kappa_[item] * expl(-d * t.inv_two_s2_) * h_of(u, t.inv_s2_, t.inv_two_s2_) /
           h_of(p0, t.inv_s2_, t.inv_two_s2_);
}

// The overflow stream of one main block, read word by word.
class SlowBits {
public:
    SlowBits(const chacha20::Key& key, uint64_t main_block) : key_(key), stream_(kOverflowStreamBit | main_block) {}
    uint64_t next() {
        if (pos_ == 8) {
            const uint32_t w12_15[4] = {static_cast<uint32_t>(counter_), static_cast<uint32_t>(counter_ >> 32),
                                        static_cast<uint32_t>(stream_), static_cast<uint32_t>(stream_ >> 32)};
            uint32_t out[16];
            chacha20::block_reference(key_, w12_15, out);
            for (int k = 0; k < 8; ++k)
                buf_[k] = static_cast<uint64_t>(out[2 * k]) | (static_cast<uint64_t>(out[2 * k + 1]) << 32);
            ++counter_;
            pos_ = 0;
        }
        return buf_[pos_++];
    }

private:
    const chacha20::Key& key_;
    uint64_t stream_;
    uint64_t counter_ = 0;
    uint64_t buf_[8];
    int pos_ = 8;
};

// Finishes the trial that `w` started and runs further trials from `bits`
// until one is accepted; returns its z.
__attribute__((noinline)) int64_t slow_sample(const Table& t, uint64_t w, SlowBits& bits, long double centre) {
    for (;;) {
        const uint64_t item = w & kMask15;
        const uint64_t e = t.entry_[item];
        const uint64_t coin = (w >> 15) & kMask20;
        const uint64_t top = e & kMask20;
        uint64_t chosen;
        if (coin != top) {
            chosen = coin < top ? item : (e >> 20) & kMask15;
        } else {  // compare the remaining 92 bits of the coin with the threshold's
            const uint64_t r1 = bits.next(), r2 = bits.next();
            const u128 rest = (static_cast<u128>(r1) << 28) | (r2 >> 36);
            const u128 low = t.threshold_[item] & ((static_cast<u128>(1) << 92) - 1);
            chosen = rest < low ? item : (e >> 20) & kMask15;
        }
        if (t.kappa_[chosen] > 0.0L) {
            const BlockGeometry g = geometry(t, static_cast<int64_t>(chosen));
            // Core blocks take their offset from the trial word; the (wider,
            // almost never drawn) tail blocks from the overflow stream.
            const uint64_t offset = g.width == Table::kWidth ? (w >> 35) & (Table::kWidth - 1)
                                                             : bits.next() & (Table::kTailWidth - 1);
            const int64_t z = g.lo + static_cast<int64_t>(offset);
            const uint64_t u14 = w >> 50;
            // The fast path's test first (its bound is conservative), then the exact one.
            const uint64_t bound = chosen == item ? (e >> 35) & kMask14 : (e >> 49) & kMask14;
            if (u14 < bound) return z;
            // u = (u14 + r / 2^64) / 2^14 against a(z). When a(z) 2^14 is not
            // in [u14, u14 + 1) the 14 bits decide (the same outcome as the
            // 78-bit comparison, without drawing r); otherwise compare 78-bit
            // integers.
            const long double a14 = ldexpl(acceptance(t, static_cast<int64_t>(chosen), z, centre), 14);
            if (a14 >= static_cast<long double>(u14 + 1)) return z;
            if (a14 > static_cast<long double>(u14)) {
                const u128 u78 = (static_cast<u128>(u14) << 64) | bits.next();
                const u128 a78 = static_cast<u128>(ceill(ldexpl(a14, 64)));
                if (u78 < a78) return z;
            }
        }
        w = bits.next();  // rejected (or the reject item): a fresh trial
    }
}

struct Job {
    chacha20::Key key;
    uint64_t stream_id;
    uint64_t first_block;
    size_t n;
    const Table* table;
    int e;
    const void* x;
    void* out;
    int kind;  // 0: int64 noise, 1: float64 release, 2: float32 release
};

VFLSEC_ALWAYS_INLINE int64_t fast_sample(const Table& t, const uint64_t* entry, uint64_t w, bool& done) {
    const uint64_t item = w & kMask15;
    const uint64_t e = entry[item];
    const uint64_t coin = (w >> 15) & kMask20;
    const uint64_t top = e & kMask20;
    const bool alias = coin > top;
    const uint64_t chosen = alias ? (e >> 20) & kMask15 : item;
    const uint64_t bound = alias ? (e >> 49) & kMask14 : (e >> 35) & kMask14;
    done = (coin != top) & ((w >> 50) < bound);
    return (static_cast<int64_t>(chosen) - t.half_blocks_) * Table::kWidth +
           static_cast<int64_t>((w >> 35) & (Table::kWidth - 1));
}

constexpr double kRangeLimit = 0x1p62;

// The centre c = x / g - rint(x / g) in [-1/2, 1/2] of value i (exact: Sterbenz);
// 0 for the integer noise alone.
long double centre(const Job& job, size_t i, double scale_down) {
    if (job.kind == 0) return 0.0L;
    const double v = job.kind == 1 ? static_cast<const double*>(job.x)[i]
                                   : static_cast<double>(static_cast<const float*>(job.x)[i]);
    const double q = v * scale_down;
    const double c = q - std::rint(q);
    return std::isfinite(c) ? static_cast<long double>(c) : 0.0L;  // out-of-range values are refused anyway
}

// Writes the releases of values pos .. pos + count - 1 from their integer
// noise z. Returns how many were out of range.
VFLSEC_ALWAYS_INLINE size_t write_values(const Job& job, const int64_t* z, size_t pos, size_t count,
                                         double scale_down, double scale_up) {
    size_t bad = 0;
    switch (job.kind) {
        case 0: {
            int64_t* o = static_cast<int64_t*>(job.out) + pos;
            for (size_t k = 0; k < count; ++k) o[k] = z[k];
            break;
        }
        case 1: {
            const double* x = static_cast<const double*>(job.x) + pos;
            double* o = static_cast<double*>(job.out) + pos;
            for (size_t k = 0; k < count; ++k) {
                const double q = std::rint(x[k] * scale_down);
                const bool ok = std::fabs(q) < kRangeLimit;
                const int64_t lattice = ok ? static_cast<int64_t>(q) : 0;
                const double v = static_cast<double>(lattice + z[k]) * scale_up;
                o[k] = ok ? v : std::nan("");
                bad += (!ok || !std::isfinite(v)) ? 1 : 0;
            }
            break;
        }
        default: {
            const float* x = static_cast<const float*>(job.x) + pos;
            float* o = static_cast<float*>(job.out) + pos;
            for (size_t k = 0; k < count; ++k) {
                const double q = std::rint(static_cast<double>(x[k]) * scale_down);
                const bool ok = std::fabs(q) < kRangeLimit;
                const int64_t lattice = ok ? static_cast<int64_t>(q) : 0;
                const float v = static_cast<float>(static_cast<double>(lattice + z[k]) * scale_up);
                o[k] = ok ? v : std::nanf("");
                bad += (!ok || !std::isfinite(v)) ? 1 : 0;
            }
            break;
        }
    }
    return bad;
}

// The values of one main block: `words` are its 8 trial words, `pos` its first
// value, `count` (<= 8) the values it holds. Returns how many were out of range.
VFLSEC_ALWAYS_INLINE size_t finish_block(const Job& job, const Table& t, const uint64_t* entry,
                                         const uint64_t (&words)[8], size_t pos, size_t count,
                                         uint64_t main_block, double scale_down, double scale_up) {
    int64_t z[8];
    bool all_done = true;
    bool done[8];
    for (size_t k = 0; k < count; ++k) {
        z[k] = fast_sample(t, entry, words[k], done[k]);
        all_done &= done[k];
    }
    if (__builtin_expect(!all_done, 0)) {
        SlowBits bits(job.key, main_block);
        for (size_t k = 0; k < count; ++k)
            if (!done[k]) z[k] = slow_sample(t, words[k], bits, centre(job, pos + k, scale_down));
    }
    const size_t bad = write_values(job, z, pos, count, scale_down, scale_up);
    secure_zero(z, sizeof z);
    return bad;
}

template <int L>
VFLSEC_ALWAYS_INLINE size_t run_blocks(const Job& job, uint64_t b0, uint64_t b1) {
    alignas(64) uint32_t w[16][L];
    const Table& t = *job.table;
    const uint64_t* entry = t.entry_.data();
    const double scale_down = std::ldexp(1.0, -job.e);
    const double scale_up = std::ldexp(1.0, job.e);
    size_t bad = 0;
    uint64_t words[8];
    for (uint64_t b = b0; b < b1; b += L) {
        chacha20::blocks_lanes<L>(job.key, job.stream_id, job.first_block + b, w);
        const uint64_t nb = std::min<uint64_t>(b1 - b, L);
        for (uint64_t j = 0; j < nb; ++j) {
            const size_t pos = static_cast<size_t>(b + j) * 8;
            const size_t count = std::min<size_t>(8, job.n - pos);
            for (size_t k = 0; k < 8; ++k)
                words[k] = static_cast<uint64_t>(w[2 * k][j]) | (static_cast<uint64_t>(w[2 * k + 1][j]) << 32);
            bad += finish_block(job, t, entry, words, pos, count, job.first_block + b + j, scale_down, scale_up);
        }
    }
    secure_zero(w, sizeof w);
    secure_zero(words, sizeof words);
    return bad;
}

// AVX-512 (F, DQ, VL): the fast path of 8 values at once, one 512-bit vector
// per main block, bit-identical to finish_block (which takes any block with
// a slow-path value or fewer than 8 values). The 16 blocks of one ChaCha20
// call arrive lane-major (word i of block j in w[i][j]); a 16 x 16 transpose
// of 32-bit words gives block j's 8 trial words in one register.
#define VFLSEC_AVX512 __attribute__((target("avx512f,avx512dq,avx512vl")))
// GCC 12 reports the _mm512_undefined_* sources inside its own gather and
// conversion intrinsics as "may be used uninitialized": a false positive.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

VFLSEC_AVX512 VFLSEC_ALWAYS_INLINE void transpose16(__m512i (&r)[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    // r[4g + e], 128-bit lane l: rows 4g..4g+3 of column 4l + e
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    for (int e = 0; e < 4; ++e) {
        const __m512i u0 = _mm512_shuffle_i32x4(r[e], r[4 + e], 0x88);
        const __m512i u1 = _mm512_shuffle_i32x4(r[e], r[4 + e], 0xdd);
        const __m512i u2 = _mm512_shuffle_i32x4(r[8 + e], r[12 + e], 0x88);
        const __m512i u3 = _mm512_shuffle_i32x4(r[8 + e], r[12 + e], 0xdd);
        t[e] = _mm512_shuffle_i32x4(u0, u2, 0x88);      // column e
        t[8 + e] = _mm512_shuffle_i32x4(u0, u2, 0xdd);  // column 8 + e
        t[4 + e] = _mm512_shuffle_i32x4(u1, u3, 0x88);  // column 4 + e
        t[12 + e] = _mm512_shuffle_i32x4(u1, u3, 0xdd); // column 12 + e
    }
    for (int i = 0; i < 16; ++i) r[i] = t[i];
}

VFLSEC_AVX512 size_t run_avx512_vector(const Job& job, uint64_t b0, uint64_t b1) {
    alignas(64) uint32_t w[16][16];
    const Table& t = *job.table;
    const uint64_t* entry = t.entry_.data();
    const double scale_down = std::ldexp(1.0, -job.e);
    const double scale_up = std::ldexp(1.0, job.e);
    const __m512i m14 = _mm512_set1_epi64(static_cast<int64_t>(kMask14));
    const __m512i m15 = _mm512_set1_epi64(static_cast<int64_t>(kMask15));
    const __m512i m20 = _mm512_set1_epi64(static_cast<int64_t>(kMask20));
    const __m512i m_offset = _mm512_set1_epi64(Table::kWidth - 1);
    const __m512i half_blocks = _mm512_set1_epi64(t.half_blocks_);
    const __m512d down = _mm512_set1_pd(scale_down), up = _mm512_set1_pd(scale_up);
    const __m512d range = _mm512_set1_pd(kRangeLimit), dbl_max = _mm512_set1_pd(DBL_MAX);
    const __m512d nan64 = _mm512_set1_pd(std::nan(""));
    const __m256 nan32 = _mm256_set1_ps(std::nanf("")), flt_max = _mm256_set1_ps(FLT_MAX);
    size_t bad = 0;
    __m512i r[16];
    alignas(64) uint64_t words[8];
    for (uint64_t b = b0; b < b1; b += 16) {
        chacha20::blocks_lanes<16>(job.key, job.stream_id, job.first_block + b, w);
        for (int i = 0; i < 16; ++i) r[i] = _mm512_load_si512(w[i]);
        transpose16(r);
        const uint64_t nb = std::min<uint64_t>(b1 - b, 16);
        for (uint64_t j = 0; j < nb; ++j) {
            const size_t pos = static_cast<size_t>(b + j) * 8;
            const __m512i word = r[j];
            const __m512i item = _mm512_and_si512(word, m15);
            // Eight scalar loads: faster than vpgatherqq on the CPU measured
            // (AMD Zen 4: 2.8 vs 3.6 ns per value). GCC keeps both arrays in
            // registers (extract / insert), so no stack copy needs wiping.
            alignas(64) uint64_t index[8], looked_up[8];
            _mm512_store_si512(index, item);
            for (int k = 0; k < 8; ++k) looked_up[k] = entry[index[k]];
            const __m512i e = _mm512_load_si512(looked_up);
            const __m512i coin = _mm512_and_si512(_mm512_srli_epi64(word, 15), m20);
            const __m512i top = _mm512_and_si512(e, m20);
            const __mmask8 alias = _mm512_cmpgt_epu64_mask(coin, top);
            const __m512i chosen = _mm512_mask_blend_epi64(alias, item, _mm512_and_si512(_mm512_srli_epi64(e, 20), m15));
            const __m512i bound = _mm512_mask_blend_epi64(alias, _mm512_and_si512(_mm512_srli_epi64(e, 35), m14),
                                                          _mm512_and_si512(_mm512_srli_epi64(e, 49), m14));
            const __mmask8 done = _mm512_cmpneq_epu64_mask(coin, top) &
                                  _mm512_cmplt_epu64_mask(_mm512_srli_epi64(word, 50), bound);
            __m512i z = _mm512_add_epi64(_mm512_slli_epi64(_mm512_sub_epi64(chosen, half_blocks), 11),
                                         _mm512_and_si512(_mm512_srli_epi64(word, 35), m_offset));
            if (__builtin_expect(done != 0xff, 0)) {  // finish those trials, in value order (as finish_block)
                alignas(64) int64_t zs[8];
                _mm512_store_si512(words, word);
                _mm512_store_si512(zs, z);
                SlowBits bits(job.key, job.first_block + b + j);
                const size_t count = std::min<size_t>(8, job.n - pos);
                for (size_t k = 0; k < count; ++k)
                    if (!((done >> k) & 1)) zs[k] = slow_sample(t, words[k], bits, centre(job, pos + k, scale_down));
                z = _mm512_load_si512(zs);
                secure_zero(zs, sizeof zs);
            }
            if (__builtin_expect(job.n - pos < 8, 0)) {  // the last, partial block
                alignas(64) int64_t zs[8];
                _mm512_store_si512(zs, z);
                bad += write_values(job, zs, pos, job.n - pos, scale_down, scale_up);
                secure_zero(zs, sizeof zs);
                continue;
            }
            if (job.kind == 0) {
                _mm512_storeu_si512(static_cast<int64_t*>(job.out) + pos, z);
                continue;
            }
            const __m512d xv = job.kind == 1 ? _mm512_loadu_pd(static_cast<const double*>(job.x) + pos)
                                             : _mm512_cvtps_pd(_mm256_loadu_ps(static_cast<const float*>(job.x) + pos));
            const __m512d q = _mm512_roundscale_pd(_mm512_mul_pd(xv, down), _MM_FROUND_CUR_DIRECTION);
            const __mmask8 ok = _mm512_cmp_pd_mask(_mm512_abs_pd(q), range, _CMP_LT_OQ);
            const __m512i lattice = _mm512_maskz_cvttpd_epi64(ok, q);
            const __m512d v = _mm512_mul_pd(_mm512_cvtepi64_pd(_mm512_add_epi64(lattice, z)), up);
            __mmask8 finite;
            if (job.kind == 1) {
                _mm512_storeu_pd(static_cast<double*>(job.out) + pos, _mm512_mask_blend_pd(ok, nan64, v));
                finite = _mm512_cmp_pd_mask(_mm512_abs_pd(v), dbl_max, _CMP_LE_OQ);
            } else {
                const __m256 f = _mm512_cvtpd_ps(v);
                _mm256_storeu_ps(static_cast<float*>(job.out) + pos, _mm256_mask_blend_ps(ok, nan32, f));
                finite = _mm256_cmp_ps_mask(_mm256_andnot_ps(_mm256_set1_ps(-0.0f), f), flt_max, _CMP_LE_OQ);
            }
            bad += static_cast<size_t>(__builtin_popcount(static_cast<unsigned>(static_cast<__mmask8>(~(ok & finite)))));
        }
    }
    for (int i = 0; i < 16; ++i) r[i] = _mm512_setzero_si512();
    secure_zero(w, sizeof w);
    secure_zero(words, sizeof words);
    return bad;
}

#pragma GCC diagnostic pop
#undef VFLSEC_AVX512

__attribute__((target("avx2"))) size_t run_avx2(const Job& job, uint64_t b0, uint64_t b1) {
    return run_blocks<8>(job, b0, b1);
}
size_t run_default(const Job& job, uint64_t b0, uint64_t b1) { return run_blocks<4>(job, b0, b1); }

// Indexed like the paths of isa::noise_family() (noise.cpp), which the release
// shares with the float noise kernels: its avx512f path requires F, DQ and VL.
using RunFn = size_t (*)(const Job&, uint64_t, uint64_t);
constexpr RunFn kRun[] = {run_default, run_avx2, run_avx512_vector};

size_t execute(ChaCha20Generator& gen, Job job) {
    if (job.n == 0) return 0;
    const uint64_t nblocks = job.n / 8 + (job.n % 8 != 0);
    Reservation r = gen.reserve(nblocks);
    // Overflow stream ids are 2^63 | main block: main blocks must stay below 2^63.
    if (r.first_block >= kOverflowStreamBit - nblocks)
        throw std::overflow_error("vflsec: block counter reached 2^63; create a new generator");
    job.key = r.key;
    job.stream_id = r.stream_id;
    job.first_block = r.first_block;
    secure_zero(&r, sizeof r);
    const RunFn run = isa::noise_family().pick(kRun);
    const size_t bad = sum_over_block_ranges(nblocks, [&](uint64_t b0, uint64_t b1) { return run(job, b0, b1); });
    secure_zero(&job.key, sizeof job.key);
    return bad;
}

}  // namespace

LatticeGaussianTable::LatticeGaussianTable(double s) : s_(s) {
    if (!(s >= 0x1p20 && s < 0x1p21))
        throw std::invalid_argument("lattice Gaussian scale must be in [2^20, 2^21), got " + std::to_string(s));
    const long double ls = s;
    inv_s2_ = 1.0L / (ls * ls);
    inv_two_s2_ = 0.5L * inv_s2_;
    half_blocks_ = static_cast<int64_t>(std::ceil(13.0 * s / static_cast<double>(kWidth)));
    const int64_t core = 2 * half_blocks_;  // <= 2 * 13 * 2^10 = 26624
    const double edge = static_cast<double>(half_blocks_ * kWidth);
    tail_blocks_ = static_cast<int64_t>(std::ceil((kSupportSigmas * s - edge) / static_cast<double>(kTailWidth)));
    const int64_t blocks = core + 2 * tail_blocks_;  // <= 26624 + 2 * 936 < kItems
    const int64_t reject = blocks;
    support_ = half_blocks_ * kWidth + tail_blocks_ * kTailWidth;

    // Peak weight R(p0) / R(0) of every block (p0: the envelope point, which
    // covers every centre), and C = (1 - 2^-16) 2^127 / sum.
    std::vector<long double> peak(static_cast<size_t>(blocks));
    long double total = 0.0L;
    for (int64_t i = 0; i < blocks; ++i) {
        const long double z = envelope_point(geometry(*this, i));
        peak[static_cast<size_t>(i)] = expl(-z * z * inv_two_s2_) * h_of(z, inv_s2_, inv_two_s2_);
        total += peak[static_cast<size_t>(i)];
    }
    const long double c = ldexpl(1.0L - ldexpl(1.0L, -16), kTotalBits) / total;

    // Integer masses m_b = floor(C peak width / W) + 1 >= C peak width / W (a
    // tail block proposes each of its points with W / width of the weight);
    // the reject item takes the rest.
    std::vector<u128> mass(kItems, 0);
    kappa_.assign(kItems, 0.0L);
    u128 used = 0;
    for (int64_t i = 0; i < blocks; ++i) {
        const long double cp = c * peak[static_cast<size_t>(i)] *
                               static_cast<long double>(geometry(*this, i).width / kWidth);
        const u128 m = static_cast<u128>(floorl(cp)) + 1;
        mass[static_cast<size_t>(i)] = m;
        kappa_[static_cast<size_t>(i)] = cp / static_cast<long double>(m);
        used += m;
    }
    const u128 all = static_cast<u128>(1) << kTotalBits;
    if (used > all) throw std::logic_error("vflsec: lattice Gaussian table masses exceed 2^127");
    mass[static_cast<size_t>(reject)] = all - used;

    // Vose's alias method in exact integer arithmetic: column capacity 2^112.
    const u128 cap = static_cast<u128>(1) << kThresholdBits;
    threshold_.assign(kItems, cap);
    std::vector<uint32_t> alias(kItems);
    for (int i = 0; i < kItems; ++i) alias[static_cast<size_t>(i)] = static_cast<uint32_t>(i);
    std::vector<uint32_t> small, large;
    for (int i = 0; i < kItems; ++i) (mass[static_cast<size_t>(i)] < cap ? small : large).push_back(static_cast<uint32_t>(i));
    while (!small.empty() && !large.empty()) {
        const uint32_t sm = small.back();
        small.pop_back();
        const uint32_t lg = large.back();
        threshold_[sm] = mass[sm];
        alias[sm] = lg;
        mass[lg] -= cap - mass[sm];
        if (mass[lg] < cap) {
            large.pop_back();
            small.push_back(lg);
        }
    }
    // Leftovers hold exactly cap (exact arithmetic): full columns, alias = self.

    // Lower bounds on a(z) in each block, 14 bits, with a 2^-40 margin for the
    // evaluation error (a(z) decreases with |z| within a block).
    std::vector<uint64_t> bound(kItems, 0);
    for (int64_t i = 0; i < core; ++i) {  // tail blocks keep 0: always the slow path
        // worst centre: half a step away from 0, beyond the far end
        const int64_t zfar = geometry(*this, i).zfar;
        const long double a_far = acceptance(*this, i, zfar, zfar >= 0 ? -0.5L : 0.5L) - ldexpl(1.0L, -40);
        const long double scaled = floorl(ldexpl(a_far, 14));
        bound[static_cast<size_t>(i)] = scaled <= 0.0L ? 0 : std::min<uint64_t>(static_cast<uint64_t>(scaled), kMask14);
    }
    entry_.resize(kItems);
    for (int i = 0; i < kItems; ++i) {
        const u128 thr = threshold_[static_cast<size_t>(i)];
        uint64_t top;
        uint32_t al = alias[static_cast<size_t>(i)];
        if (thr >= cap) {  // full column: both outcomes are this item
            top = kMask20;
            al = static_cast<uint32_t>(i);
        } else {
            top = static_cast<uint64_t>(thr >> (kThresholdBits - 20));
        }
        entry_[static_cast<size_t>(i)] = top | (static_cast<uint64_t>(al) << 20) | (bound[static_cast<size_t>(i)] << 35) |
                                          (bound[al] << 49);
    }
}

size_t add_lattice_gaussian_f64(ChaCha20Generator& gen, const LatticeGaussianTable& table, const double* x,
                                double* out, size_t n, int e) {
    return execute(gen, Job{{}, 0, 0, n, &table, e, x, out, 1});
}

size_t add_lattice_gaussian_f32(ChaCha20Generator& gen, const LatticeGaussianTable& table, const float* x,
                                float* out, size_t n, int e) {
    return execute(gen, Job{{}, 0, 0, n, &table, e, x, out, 2});
}

void fill_lattice_gaussian(ChaCha20Generator& gen, const LatticeGaussianTable& table, int64_t* out, size_t n) {
    execute(gen, Job{{}, 0, 0, n, &table, 0, nullptr, out, 0});
}

}  // namespace vflsec::noise
