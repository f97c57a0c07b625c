// Secure Gaussian noise kernels; see noise.hpp for the stream layout.
//
// Bit-identical results on every ISA path rest on three things: each path
// evaluates the same IEEE operations in the same order (GCC vectorizes the
// lane loops without reassociating), +, *, / and sqrt are correctly rounded
// everywhere, and this file is compiled with -ffp-contract=off so the AVX-512
// path cannot fuse a multiply-add that the SSE2 path rounds twice. The
// transform itself (box_muller.hpp) is shared with the CUDA kernels.
#include "noise.hpp"

#include "box_muller.hpp"
#include "isa_dispatch.hpp"
#include "parallel.hpp"
#include "secure_zero.hpp"

#include <algorithm>
#include <cstring>

namespace vflsec::noise {

namespace {

using box_muller::is_finite_bits;
using chacha20::Key;

// ---------------------------------------------------------------------------
// block-range kernels, instantiated once per ISA with its natural lane count
// ---------------------------------------------------------------------------

enum class Op { kNormalF64, kNormalF32, kAddF64, kAddF32, kRaw };

struct Job {
    Key key;
    uint64_t stream_id;
    uint64_t first_block;
    size_t n;  // values requested
    Op op;
    double sigma;
    const void* x;
    void* out;
};

// Words of L blocks (lane-major) -> 8L normals in stream order.
template <int L>
VFLSEC_ALWAYS_INLINE void normals_from_words(const uint32_t (&w)[16][L], double* z) {
    alignas(64) double z0[4][L];
    alignas(64) double z1[4][L];
    for (int p = 0; p < 4; ++p) {
        for (int j = 0; j < L; ++j) {
            const uint64_t a = static_cast<uint64_t>(w[4 * p][j]) | (static_cast<uint64_t>(w[4 * p + 1][j]) << 32);
            const uint64_t b = static_cast<uint64_t>(w[4 * p + 2][j]) | (static_cast<uint64_t>(w[4 * p + 3][j]) << 32);
            box_muller::transform(a, b, z0[p][j], z1[p][j]);
        }
    }
    for (int j = 0; j < L; ++j) {
        for (int p = 0; p < 4; ++p) {
            z[8 * j + 2 * p] = z0[p][j];
            z[8 * j + 2 * p + 1] = z1[p][j];
        }
    }
}

template <int L>
VFLSEC_ALWAYS_INLINE void raw_from_words(const uint32_t (&w)[16][L], uint64_t* r) {
    for (int j = 0; j < L; ++j)
        for (int k = 0; k < 8; ++k)
            r[8 * j + k] = static_cast<uint64_t>(w[2 * k][j]) | (static_cast<uint64_t>(w[2 * k + 1][j]) << 32);
}

// Values [8 b0, min(8 b1, n)) of the job: blocks b0 .. b1-1 of the request.
template <int L>
VFLSEC_ALWAYS_INLINE size_t run_blocks(const Job& job, uint64_t b0, uint64_t b1) {
    alignas(64) uint32_t w[16][L];
    alignas(64) double z[8 * L];
    size_t nonfinite = 0;
    const double sigma = job.sigma;
    for (uint64_t b = b0; b < b1; b += L) {
        chacha20::blocks_lanes<L>(job.key, job.stream_id, job.first_block + b, w);
        const size_t pos = static_cast<size_t>(b) * 8;
        const size_t count = std::min<size_t>(static_cast<size_t>(std::min<uint64_t>(b1 - b, L)) * 8, job.n - pos);
        switch (job.op) {
            case Op::kRaw: {
                alignas(64) uint64_t r[8 * L];
                raw_from_words<L>(w, r);
                std::memcpy(static_cast<uint64_t*>(job.out) + pos, r, count * sizeof(uint64_t));
                break;
            }
            case Op::kNormalF64: {
                normals_from_words<L>(w, z);
                double* o = static_cast<double*>(job.out) + pos;
                for (size_t i = 0; i < count; ++i) o[i] = z[i] * sigma;
                break;
            }
            case Op::kNormalF32: {
                normals_from_words<L>(w, z);
                float* o = static_cast<float*>(job.out) + pos;
                for (size_t i = 0; i < count; ++i) o[i] = static_cast<float>(z[i] * sigma);
                break;
            }
            case Op::kAddF64: {
                normals_from_words<L>(w, z);
                const double* x = static_cast<const double*>(job.x) + pos;
                double* o = static_cast<double*>(job.out) + pos;
                size_t bad = 0;
                for (size_t i = 0; i < count; ++i) {
                    const double v = x[i] + z[i] * sigma;
                    o[i] = v;
                    bad += is_finite_bits(v) ? 0 : 1;
                }
                nonfinite += bad;
                break;
            }
            case Op::kAddF32: {
                normals_from_words<L>(w, z);
                const float* x = static_cast<const float*>(job.x) + pos;
                float* o = static_cast<float*>(job.out) + pos;
                size_t bad = 0;
                for (size_t i = 0; i < count; ++i) {
                    const float v = static_cast<float>(static_cast<double>(x[i]) + z[i] * sigma);
                    o[i] = v;
                    bad += is_finite_bits(v) ? 0 : 1;
                }
                nonfinite += bad;
                break;
            }
        }
    }
    secure_zero(w, sizeof w);
    return nonfinite;
}

__attribute__((target("avx512f"))) size_t run_avx512(const Job& job, uint64_t b0, uint64_t b1) {
    return run_blocks<16>(job, b0, b1);
}
__attribute__((target("avx2"))) size_t run_avx2(const Job& job, uint64_t b0, uint64_t b1) {
    return run_blocks<8>(job, b0, b1);
}
size_t run_default(const Job& job, uint64_t b0, uint64_t b1) { return run_blocks<4>(job, b0, b1); }

using RunFn = size_t (*)(const Job&, uint64_t, uint64_t);
// Indexed like the paths of isa::noise_family() below.
constexpr RunFn kRun[] = {run_default, run_avx2, run_avx512};

size_t execute(const Job& job) {
    const uint64_t nblocks = job.n / 8 + (job.n % 8 != 0);
    const RunFn fn = isa::noise_family().pick(kRun);
    return sum_over_block_ranges(nblocks, [&](uint64_t b0, uint64_t b1) { return fn(job, b0, b1); });
}

// Reserves the request's blocks, then runs it on the ISA path in use; the
// key's copies are wiped before returning.
size_t run_job(ChaCha20Generator& gen, Op op, size_t n, double sigma, const void* x, void* out) {
    if (n == 0) return 0;
    const uint64_t nblocks = n / 8 + (n % 8 != 0);
    Reservation r = gen.reserve(nblocks);
    Job job{r.key, r.stream_id, r.first_block, n, op, sigma, x, out};
    secure_zero(&r, sizeof r);
    const size_t nonfinite = execute(job);
    secure_zero(&job.key, sizeof job.key);
    return nonfinite;
}

}  // namespace

void fill_normal_f64(ChaCha20Generator& gen, double* out, size_t n, double sigma) {
    run_job(gen, Op::kNormalF64, n, sigma, nullptr, out);
}
void fill_normal_f32(ChaCha20Generator& gen, float* out, size_t n, double sigma) {
    run_job(gen, Op::kNormalF32, n, sigma, nullptr, out);
}
size_t add_normal_f64(ChaCha20Generator& gen, const double* x, double* out, size_t n, double sigma) {
    return run_job(gen, Op::kAddF64, n, sigma, x, out);
}
size_t add_normal_f32(ChaCha20Generator& gen, const float* x, float* out, size_t n, double sigma) {
    return run_job(gen, Op::kAddF32, n, sigma, x, out);
}
void fill_raw(ChaCha20Generator& gen, uint64_t* out, size_t n) { run_job(gen, Op::kRaw, n, 1.0, nullptr, out); }

// ---------------------------------------------------------------------------
// test hooks
// ---------------------------------------------------------------------------

void log_unit_interval(const double* u, double* out, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = box_muller::log_positive(u[i]);
}

void sincos_quarter(const double* x, double* sin_out, double* cos_out, size_t n) {
    for (size_t i = 0; i < n; ++i) box_muller::sincos_small(x[i], sin_out[i], cos_out[i]);
}

}  // namespace vflsec::noise

namespace vflsec::isa {

// The avx512f path requires DQ and VL besides F: the lattice release's vector
// kernel (lattice_gaussian.cpp) uses them. Every AVX-512 CPU since Skylake-X
// and Zen 4 has all three; a CPU without them (Xeon Phi) takes the avx2 path.
constexpr Path kNoisePaths[] = {{"default", 0}, {"avx2", kAvx2}, {"avx512f", kAvx512F | kAvx512Dq | kAvx512Vl}};

Family& noise_family() {
    static Family family("noise", kNoisePaths);
    return family;
}

}  // namespace vflsec::isa
