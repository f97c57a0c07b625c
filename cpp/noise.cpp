// Secure Gaussian noise kernels; see noise.hpp for the stream layout.
//
// Bit-identical results on every ISA path rest on three things: each path
// evaluates the same IEEE operations in the same order (GCC vectorizes the
// lane loops without reassociating), +, *, / and sqrt are correctly rounded
// everywhere, and this file is compiled with -ffp-contract=off so the AVX-512
// path cannot fuse a multiply-add that the SSE2 path rounds twice.
#include "noise.hpp"

#include "parallel.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

namespace vflsec::noise {

void secure_zero(void* p, size_t n) {
    volatile unsigned char* q = static_cast<volatile unsigned char*>(p);
    while (n--) *q++ = 0;
}

namespace {

using chacha20::Key;

void read_dev_urandom(uint8_t* out, size_t n) {
    int fd;
    do {
        fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "vflsec: cannot open /dev/urandom");
    size_t got = 0;
    while (got < n) {
        const ssize_t r = ::read(fd, out + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            const int err = r < 0 ? errno : EIO;
            ::close(fd);
            throw std::system_error(err, std::generic_category(), "vflsec: reading /dev/urandom failed");
        }
        got += static_cast<size_t>(r);
    }
    ::close(fd);
}

}  // namespace

void os_entropy(uint8_t* out, size_t n) {
    size_t got = 0;
    while (got < n) {
        const ssize_t r = ::getrandom(out + got, n - got, 0);
        if (r > 0) {
            got += static_cast<size_t>(r);
        } else if (r < 0 && errno == EINTR) {
            continue;
        } else if (r < 0 && errno == ENOSYS) {
            // Kernels before 3.17 lack getrandom; /dev/urandom is the same CSPRNG.
            read_dev_urandom(out + got, n - got);
            return;
        } else {
            throw std::system_error(r < 0 ? errno : EIO, std::generic_category(),
                                    "vflsec: getrandom() failed; no OS entropy for a secure generator");
        }
    }
}

namespace {

// ---------------------------------------------------------------------------
// branch-free math on one lane (inlined into vectorized loops)
// ---------------------------------------------------------------------------

VFLSEC_ALWAYS_INLINE double from_bits(uint64_t b) { return __builtin_bit_cast(double, b); }
VFLSEC_ALWAYS_INLINE uint64_t to_bits(double d) { return __builtin_bit_cast(uint64_t, d); }

// Exact conversion of v < 2^52: place v in the mantissa of 2^52 and subtract.
// (AVX2 has no uint64 -> double instruction; this is one OR and one SUB.)
VFLSEC_ALWAYS_INLINE double small_to_double(uint64_t v) {
    return from_bits(0x4330000000000000ull | v) - 0x1p52;
}

constexpr double kLn2Hi = 0x1.62e42p-1;  // 21 significant bits: e * kLn2Hi is exact
constexpr double kLn2Lo = 0x1.fdf473de6af28p-22;
constexpr double kPiOver2 = 0x1.921fb54442d18p+0;

// ln(u) for a positive normal double. u = m 2^e with m in [sqrt(1/2), sqrt(2)),
// ln m = 2 atanh(f), f = (m - 1) / (m + 1), |f| <= 0.1716; the atanh series
// to f^19 leaves a relative truncation error below 3e-17.
// The split is pure integer arithmetic (no compare, no select), which AVX2
// vectorizes: subtracting the bits of sqrt(1/2) makes a mantissa above
// sqrt(2) carry into the exponent field.
VFLSEC_ALWAYS_INLINE double log_positive(double u) {
    constexpr uint64_t kSqrtHalfBits = 0x3fe6a09e667f3bcdull;
    constexpr uint64_t kBias = 1024;  // keeps the shifted exponent non-negative
    const uint64_t ix = to_bits(u);
    const uint64_t tmp = ix + (kBias << 52) - kSqrtHalfBits;
    const uint64_t e_biased = tmp >> 52;  // e + kBias
    const double m = from_bits(ix - (e_biased << 52) + (kBias << 52));
    const double e = small_to_double(e_biased) - static_cast<double>(kBias);
    const double f = (m - 1.0) / (m + 1.0);
    const double s = f * f;
    // 2/(2k+1) for k = 9 .. 1
    double p = 0x1.af286bca1af28p-4;
    p = p * s + 0x1.e1e1e1e1e1e1ep-4;
    p = p * s + 0x1.1111111111111p-3;
    p = p * s + 0x1.3b13b13b13b14p-3;
    p = p * s + 0x1.745d1745d1746p-3;
    p = p * s + 0x1.c71c71c71c71cp-3;
    p = p * s + 0x1.2492492492492p-2;
    p = p * s + 0x1.999999999999ap-2;
    p = p * s + 0x1.5555555555555p-1;
    const double tail = (f * s) * p + e * kLn2Lo;
    return e * kLn2Hi + ((f + f) + tail);
}

// sin and cos of |x| <= pi/4 by their Taylor series to x^15 and x^16
// (truncation error below 7e-17 relative at pi/4).
VFLSEC_ALWAYS_INLINE void sincos_small(double x, double& s_out, double& c_out) {
    const double x2 = x * x;
    double ps = -0x1.ae7f3e733b81fp-41;
    ps = ps * x2 + 0x1.6124613a86d09p-33;
    ps = ps * x2 + -0x1.ae64567f544e4p-26;
    ps = ps * x2 + 0x1.71de3a556c734p-19;
    ps = ps * x2 + -0x1.a01a01a01a01ap-13;
    ps = ps * x2 + 0x1.1111111111111p-7;
    ps = ps * x2 + -0x1.5555555555555p-3;
    double pc = 0x1.ae7f3e733b81fp-45;
    pc = pc * x2 + -0x1.93974a8c07c9dp-37;
    pc = pc * x2 + 0x1.1eed8eff8d898p-29;
    pc = pc * x2 + -0x1.27e4fb7789f5cp-22;
    pc = pc * x2 + 0x1.a01a01a01a01ap-16;
    pc = pc * x2 + -0x1.6c16c16c16c17p-10;
    pc = pc * x2 + 0x1.5555555555555p-5;
    pc = pc * x2 + -0.5;
    s_out = x + (x * x2) * ps;
    c_out = 1.0 + x2 * pc;
}

// Two uniform words -> two independent N(0, 1) values (see noise.hpp).
VFLSEC_ALWAYS_INLINE void box_muller(uint64_t w1, uint64_t w2, double& z0, double& z1) {
    const uint64_t k1 = w1 >> 11;  // 53 bits
    // (k1 + 1) / 2^53, assembled exactly from two pieces below 2^52.
    const double u1 = ((small_to_double(k1 >> 21) * 0x1p21 + small_to_double(k1 & 0x1fffffull)) + 1.0) * 0x1p-53;
    // + 0.0 turns the -0.0 of u1 == 1 into +0.0.
    const double r = __builtin_sqrt(log_positive(u1) * -2.0 + 0.0);

    // theta = q pi/2 + phi, q = top 2 of the 53 bits, phi in [-pi/4, pi/4):
    // rotating (cos phi, sin phi) by q quarter turns is exact (swap, negate).
    const uint64_t k2 = w2 >> 11;
    const uint64_t q = k2 >> 51;
    const double phi = (small_to_double(k2 & ((1ull << 51) - 1)) * 0x1p-51 - 0.5) * kPiOver2;
    double s, c;
    sincos_small(phi, s, c);
    // Selects as bit masks: written with ?:, GCC kept branches in the AVX2 and
    // SSE2 loops and left them scalar.
    const uint64_t swap = 0 - (q & 1);  // all ones for q = 1, 3
    const uint64_t sb = to_bits(s), cb = to_bits(c);
    const uint64_t neg_cos = (q ^ (q >> 1)) & 1;  // q = 1, 2
    const uint64_t neg_sin = q >> 1;              // q = 2, 3
    const double cos_theta = from_bits(((cb & ~swap) | (sb & swap)) ^ (neg_cos << 63));
    const double sin_theta = from_bits(((sb & ~swap) | (cb & swap)) ^ (neg_sin << 63));
    z0 = r * cos_theta;
    z1 = r * sin_theta;
}

VFLSEC_ALWAYS_INLINE bool is_finite_bits(double v) { return (to_bits(v) & 0x7ff0000000000000ull) != 0x7ff0000000000000ull; }

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
            box_muller(a, b, z0[p][j], z1[p][j]);
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
struct IsaPath {
    const char* name;
    RunFn fn;
};
constexpr IsaPath kPaths[] = {{"default", run_default}, {"avx2", run_avx2}, {"avx512f", run_avx512}};

bool cpu_has(int path) {
    __builtin_cpu_init();
    switch (path) {
        case 2: return __builtin_cpu_supports("avx512f");
        case 1: return __builtin_cpu_supports("avx2");
        default: return true;
    }
}

int best_path() {
    for (int p = 2; p > 0; --p)
        if (cpu_has(p)) return p;
    return 0;
}

std::atomic<int> g_path{-1};

int path_index() {
    int p = g_path.load(std::memory_order_relaxed);
    if (p < 0) {
        p = best_path();
        g_path.store(p, std::memory_order_relaxed);
    }
    return p;
}

size_t execute(const Job& job) {
    const uint64_t nblocks = job.n / 8 + (job.n % 8 != 0);
    const RunFn fn = kPaths[path_index()].fn;
    return sum_over_block_ranges(nblocks, [&](uint64_t b0, uint64_t b1) { return fn(job, b0, b1); });
}

}  // namespace

// ---------------------------------------------------------------------------
// generator
// ---------------------------------------------------------------------------

ChaCha20Generator::ChaCha20Generator() : secure_(true) { rekey_from_os(); }

ChaCha20Generator::ChaCha20Generator(const uint8_t key[32], uint64_t first_block) : secure_(false) {
    key_ = chacha20::key_from_bytes(key);
    next_block_ = first_block;
    pid_ = ::getpid();
}

ChaCha20Generator::~ChaCha20Generator() { secure_zero(&key_, sizeof key_); }

void ChaCha20Generator::rekey_from_os() {
    uint8_t buf[32];
    os_entropy(buf, sizeof buf);
    key_ = chacha20::key_from_bytes(buf);
    secure_zero(buf, sizeof buf);
    stream_id_ = 0;
    next_block_ = 0;
    pid_ = ::getpid();
}

uint64_t ChaCha20Generator::blocks_used() {
    std::lock_guard<std::mutex> lock(mutex_);
    return next_block_;
}

Reservation ChaCha20Generator::reserve(uint64_t nblocks) {
    std::lock_guard<std::mutex> lock(mutex_);
    // A forked child shares the parent's key and counter: re-key it, or both
    // processes would hand out the same noise.
    if (secure_ && ::getpid() != pid_) rekey_from_os();
    if (nblocks > UINT64_MAX - next_block_)  // next_block_ itself must not wrap
        throw std::overflow_error("vflsec: ChaCha20 block counter exhausted (2^64 - 1 blocks); create a new generator");
    Reservation r{key_, stream_id_, next_block_};
    next_block_ += nblocks;
    return r;
}

namespace {

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

void ChaCha20Generator::fill_normal_f64(double* out, size_t n, double sigma) {
    run_job(*this, Op::kNormalF64, n, sigma, nullptr, out);
}
void ChaCha20Generator::fill_normal_f32(float* out, size_t n, double sigma) {
    run_job(*this, Op::kNormalF32, n, sigma, nullptr, out);
}
size_t ChaCha20Generator::add_normal_f64(const double* x, double* out, size_t n, double sigma) {
    return run_job(*this, Op::kAddF64, n, sigma, x, out);
}
size_t ChaCha20Generator::add_normal_f32(const float* x, float* out, size_t n, double sigma) {
    return run_job(*this, Op::kAddF32, n, sigma, x, out);
}
void ChaCha20Generator::fill_raw(uint64_t* out, size_t n) { run_job(*this, Op::kRaw, n, 1.0, nullptr, out); }

// ---------------------------------------------------------------------------
// test hooks
// ---------------------------------------------------------------------------

void log_unit_interval(const double* u, double* out, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = log_positive(u[i]);
}

void sincos_quarter(const double* x, double* sin_out, double* cos_out, size_t n) {
    for (size_t i = 0; i < n; ++i) sincos_small(x[i], sin_out[i], cos_out[i]);
}

const char* select_isa(const char* name) {
    const std::string want(name);
    if (want == "auto") {
        g_path.store(best_path(), std::memory_order_relaxed);
        return current_isa();
    }
    for (int p = 0; p < 3; ++p) {
        if (want == kPaths[p].name) {
            if (!cpu_has(p)) throw std::invalid_argument("this CPU does not support the " + want + " path");
            g_path.store(p, std::memory_order_relaxed);
            return kPaths[p].name;
        }
    }
    throw std::invalid_argument("unknown ISA path '" + want + "'; expected auto, avx512f, avx2 or default");
}

const char* current_isa() { return kPaths[path_index()].name; }

}  // namespace vflsec::noise
