// Secure Gaussian noise on the GPU: counter-mode ChaCha20 and the constant-
// time Box-Muller transform of cpp/noise.cpp, one thread per 64-byte block.
//
// Bit-identical to the CPU: the stream layout (value i from block
// first + i / 8, pair k from words 2k and 2k + 1) and every floating-point
// operation are the CPU's, in the same order. +, -, *, / and sqrt are
// correctly rounded in double on the GPU, and this file is compiled with
// -fmad=false (device) and -ffp-contract=off (host) so that no multiply-add
// is fused, as cpp/noise.cpp is compiled with -ffp-contract=off. No cuRAND:
// its generators are not cryptographic.
//
// Key hygiene: the key travels to the GPU by value in the kernel's parameters
// (constant memory of the launch); nothing else stores it on the device.
#include "api.hpp"
#include "exec.cuh"

namespace vflsec::cuda {
namespace {

constexpr std::uint32_t kSigma0 = 0x61707865u, kSigma1 = 0x3320646eu, kSigma2 = 0x79622d32u,
                        kSigma3 = 0x6b206574u;  // "expand 32-byte k"

VFLSEC_HD std::uint32_t rotl32(std::uint32_t v, int n) { return (v << n) | (v >> (32 - n)); }

VFLSEC_HD void quarter_round(std::uint32_t& a, std::uint32_t& b, std::uint32_t& c, std::uint32_t& d) {
    a += b; d ^= a; d = rotl32(d, 16);
    c += d; b ^= c; b = rotl32(b, 12);
    a += b; d ^= a; d = rotl32(d, 8);
    c += d; b ^= c; b = rotl32(b, 7);
}

// RFC 8439 block function with the 64-bit counter / 64-bit stream id layout
// of cpp/chacha20.hpp (words 12-13 counter, 14-15 stream id, low word first).
VFLSEC_HD void chacha20_block(const std::uint32_t (&key)[8], std::uint64_t stream_id, std::uint64_t counter,
                              std::uint32_t (&out)[16]) {
    const std::uint32_t in[16] = {kSigma0,
                                  kSigma1,
                                  kSigma2,
                                  kSigma3,
                                  key[0],
                                  key[1],
                                  key[2],
                                  key[3],
                                  key[4],
                                  key[5],
                                  key[6],
                                  key[7],
                                  static_cast<std::uint32_t>(counter),
                                  static_cast<std::uint32_t>(counter >> 32),
                                  static_cast<std::uint32_t>(stream_id),
                                  static_cast<std::uint32_t>(stream_id >> 32)};
    std::uint32_t x[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) x[i] = in[i];
#pragma unroll
    for (int round = 0; round < 10; ++round) {
        quarter_round(x[0], x[4], x[8], x[12]);
        quarter_round(x[1], x[5], x[9], x[13]);
        quarter_round(x[2], x[6], x[10], x[14]);
        quarter_round(x[3], x[7], x[11], x[15]);
        quarter_round(x[0], x[5], x[10], x[15]);
        quarter_round(x[1], x[6], x[11], x[12]);
        quarter_round(x[2], x[7], x[8], x[13]);
        quarter_round(x[3], x[4], x[9], x[14]);
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) out[i] = x[i] + in[i];
}

VFLSEC_HD double from_bits(std::uint64_t b) {
#ifdef __CUDA_ARCH__
    return __longlong_as_double(static_cast<long long>(b));
#else
    double d;
    std::memcpy(&d, &b, sizeof d);
    return d;
#endif
}

VFLSEC_HD std::uint64_t to_bits(double v) {
#ifdef __CUDA_ARCH__
    return static_cast<std::uint64_t>(__double_as_longlong(v));
#else
    std::uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
#endif
}

// The CPU's exact conversion of v < 2^52 (bits of 2^52 + v, minus 2^52).
VFLSEC_HD double small_to_double(std::uint64_t v) { return from_bits(0x4330000000000000ull | v) - 0x1p52; }

constexpr double kLn2Hi = 0x1.62e42p-1;
constexpr double kLn2Lo = 0x1.fdf473de6af28p-22;
constexpr double kPiOver2 = 0x1.921fb54442d18p+0;

// cpp/noise.cpp log_positive, operation for operation.
VFLSEC_HD double log_positive(double u) {
    constexpr std::uint64_t kSqrtHalfBits = 0x3fe6a09e667f3bcdull;
    constexpr std::uint64_t kBias = 1024;
    const std::uint64_t ix = to_bits(u);
    const std::uint64_t tmp = ix + (kBias << 52) - kSqrtHalfBits;
    const std::uint64_t e_biased = tmp >> 52;
    const double m = from_bits(ix - (e_biased << 52) + (kBias << 52));
    const double e = small_to_double(e_biased) - static_cast<double>(kBias);
    const double f = (m - 1.0) / (m + 1.0);
    const double s = f * f;
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

// cpp/noise.cpp sincos_small, operation for operation.
VFLSEC_HD void sincos_small(double x, double& s_out, double& c_out) {
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

// cpp/noise.cpp box_muller: two uniform words -> two N(0, 1) values.
VFLSEC_HD void box_muller(std::uint64_t w1, std::uint64_t w2, double& z0, double& z1) {
    const std::uint64_t k1 = w1 >> 11;
    const double u1 = ((small_to_double(k1 >> 21) * 0x1p21 + small_to_double(k1 & 0x1fffffull)) + 1.0) * 0x1p-53;
    const double r = sqrt_of(log_positive(u1) * -2.0 + 0.0);
    const std::uint64_t k2 = w2 >> 11;
    const std::uint64_t q = k2 >> 51;
    const double phi = (small_to_double(k2 & ((1ull << 51) - 1)) * 0x1p-51 - 0.5) * kPiOver2;
    double s, c;
    sincos_small(phi, s, c);
    const std::uint64_t swap = 0 - (q & 1);
    const std::uint64_t sb = to_bits(s), cb = to_bits(c);
    const std::uint64_t neg_cos = (q ^ (q >> 1)) & 1;
    const std::uint64_t neg_sin = q >> 1;
    const double cos_theta = from_bits(((cb & ~swap) | (sb & swap)) ^ (neg_cos << 63));
    const double sin_theta = from_bits(((sb & ~swap) | (cb & swap)) ^ (neg_sin << 63));
    z0 = r * cos_theta;
    z1 = r * sin_theta;
}

VFLSEC_HD bool is_finite(double v) {
    return (to_bits(v) & 0x7ff0000000000000ull) != 0x7ff0000000000000ull;
}

VFLSEC_HD std::uint64_t word64(const std::uint32_t (&w)[16], int lo) {
    return static_cast<std::uint64_t>(w[lo]) | (static_cast<std::uint64_t>(w[lo + 1]) << 32);
}

// One thread: block first_block + b, i.e. values [8 b, min(8 b + 8, n)).
template <typename T>
struct NoiseBlocks {
    std::uint32_t key[8];
    std::uint64_t stream_id;
    std::uint64_t first_block;
    std::size_t n;
    NoiseOp op;
    double sigma;
    const T* x;
    void* out;
    unsigned long long* nonfinite;

    VFLSEC_HD void operator()(std::size_t b) const {
        std::uint32_t w[16];
        chacha20_block(key, stream_id, first_block + b, w);
        const std::size_t pos = 8 * b;
        const std::size_t count = min_of<std::size_t>(8, n - pos);
        if (op == NoiseOp::kRaw) {
            std::uint64_t* o = static_cast<std::uint64_t*>(out) + pos;
            for (std::size_t k = 0; k < count; ++k) o[k] = word64(w, static_cast<int>(2 * k));
            return;
        }
        double z[8];
        for (int p = 0; p < 4; ++p) box_muller(word64(w, 4 * p), word64(w, 4 * p + 2), z[2 * p], z[2 * p + 1]);
        T* o = static_cast<T*>(out) + pos;
        if (op == NoiseOp::kNormal) {
            for (std::size_t i = 0; i < count; ++i) o[i] = static_cast<T>(z[i] * sigma);
            return;
        }
        // float32: the sum formed in double and rounded once, as on the CPU.
        unsigned long long bad = 0;
        for (std::size_t i = 0; i < count; ++i) {
            const T v = static_cast<T>(static_cast<double>(x[pos + i]) + z[i] * sigma);
            o[i] = v;
            bad += is_finite(static_cast<double>(v)) ? 0 : 1;
        }
        if (bad != 0) {
#ifdef __CUDA_ARCH__
            atomicAdd(nonfinite, bad);
#else
            *nonfinite += bad;
#endif
        }
    }
};

template <typename T, class Exec>
void noise_run(const Exec& exec, const NoiseKey& key, NoiseOp op, std::size_t n, double sigma, const T* x, void* out,
               unsigned long long* nonfinite) {
    if (n == 0) return;
    NoiseBlocks<T> f;
    for (int i = 0; i < 8; ++i) f.key[i] = key.words[i];
    f.stream_id = key.stream_id;
    f.first_block = key.first_block;
    f.n = n;
    f.op = op;
    f.sigma = sigma;
    f.x = x;
    f.out = out;
    f.nonfinite = nonfinite;
    const std::size_t nblocks = n / 8 + (n % 8 != 0);
    exec.run(nblocks, f);
    volatile std::uint32_t* k = f.key;  // the launch has copied its parameters
    for (int i = 0; i < 8; ++i) k[i] = 0;
}

}  // namespace

template <typename T>
void noise_device(const NoiseKey& key, NoiseOp op, std::size_t n, double sigma, const T* x, void* out,
                  unsigned long long* nonfinite, int device, std::uintptr_t stream) {
    noise_run(DeviceExec(device, stream), key, op, n, sigma, x, out, nonfinite);
}
template <typename T>
void noise_host(const NoiseKey& key, NoiseOp op, std::size_t n, double sigma, const T* x, void* out,
                unsigned long long* nonfinite) {
    noise_run(HostExec(), key, op, n, sigma, x, out, nonfinite);
}

template void noise_device<float>(const NoiseKey&, NoiseOp, std::size_t, double, const float*, void*,
                                  unsigned long long*, int, std::uintptr_t);
template void noise_device<double>(const NoiseKey&, NoiseOp, std::size_t, double, const double*, void*,
                                   unsigned long long*, int, std::uintptr_t);
template void noise_host<float>(const NoiseKey&, NoiseOp, std::size_t, double, const float*, void*,
                                unsigned long long*);
template void noise_host<double>(const NoiseKey&, NoiseOp, std::size_t, double, const double*, void*,
                                 unsigned long long*);

}  // namespace vflsec::cuda
