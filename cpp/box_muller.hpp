// The constant-time Box-Muller transform of the secure noise (see noise.hpp),
// shared by the CPU kernels (cpp/noise.cpp, inlined into its SIMD lane loops)
// and the CUDA kernels (cpp/cuda/noise.cu): one definition, compiled by g++
// and by nvcc, so that a seeded stream gives the same values on both.
//
// Bit-identical results rest on every path evaluating these IEEE operations
// in this order: +, -, *, / and sqrt are correctly rounded in double on every
// CPU path and on the GPU, and no multiply-add may be fused (cpp/noise.cpp is
// compiled with -ffp-contract=off, cpp/cuda/noise.cu with -fmad=false and
// -Xcompiler=-ffp-contract=off; see CMakeLists.txt).
#pragma once

#include <cstdint>
#if defined(__CUDACC__)
#include <cmath>
#include <cstring>
#endif

#include "host_device.hpp"

namespace vflsec::box_muller {

VFLSEC_HD double from_bits(std::uint64_t b) {
#if defined(__CUDA_ARCH__)
    return __longlong_as_double(static_cast<long long>(b));
#elif defined(__CUDACC__)
    double d;
    std::memcpy(&d, &b, sizeof d);
    return d;
#else
    return __builtin_bit_cast(double, b);
#endif
}

VFLSEC_HD std::uint64_t to_bits(double v) {
#if defined(__CUDA_ARCH__)
    return static_cast<std::uint64_t>(__double_as_longlong(v));
#elif defined(__CUDACC__)
    std::uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
#else
    return __builtin_bit_cast(std::uint64_t, v);
#endif
}

VFLSEC_HD double sqrt_rn(double v) {
#if defined(__CUDACC__)
    return ::sqrt(v);
#else
    return __builtin_sqrt(v);  // one sqrtsd / vsqrtpd (compiled with -fno-math-errno)
#endif
}

// Exact conversion of v < 2^52: place v in the mantissa of 2^52 and subtract.
// (AVX2 has no uint64 -> double instruction; this is one OR and one SUB.)
VFLSEC_HD double small_to_double(std::uint64_t v) { return from_bits(0x4330000000000000ull | v) - 0x1p52; }

constexpr double kLn2Hi = 0x1.62e42p-1;  // 21 significant bits: e * kLn2Hi is exact
constexpr double kLn2Lo = 0x1.fdf473de6af28p-22;
constexpr double kPiOver2 = 0x1.921fb54442d18p+0;

// ln(u) for a positive normal double. u = m 2^e with m in [sqrt(1/2), sqrt(2)),
// ln m = 2 atanh(f), f = (m - 1) / (m + 1), |f| <= 0.1716; the atanh series
// to f^19 leaves a relative truncation error below 3e-17.
// The split is pure integer arithmetic (no compare, no select), which AVX2
// vectorizes: subtracting the bits of sqrt(1/2) makes a mantissa above
// sqrt(2) carry into the exponent field.
VFLSEC_HD double log_positive(double u) {
    constexpr std::uint64_t kSqrtHalfBits = 0x3fe6a09e667f3bcdull;
    constexpr std::uint64_t kBias = 1024;  // keeps the shifted exponent non-negative
    const std::uint64_t ix = to_bits(u);
    const std::uint64_t tmp = ix + (kBias << 52) - kSqrtHalfBits;
    const std::uint64_t e_biased = tmp >> 52;  // e + kBias
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

// Two uniform words -> two independent N(0, 1) values (see noise.hpp).
VFLSEC_HD void transform(std::uint64_t w1, std::uint64_t w2, double& z0, double& z1) {
    const std::uint64_t k1 = w1 >> 11;  // 53 bits
    // (k1 + 1) / 2^53, assembled exactly from two pieces below 2^52.
    const double u1 = ((small_to_double(k1 >> 21) * 0x1p21 + small_to_double(k1 & 0x1fffffull)) + 1.0) * 0x1p-53;
    // + 0.0 turns the -0.0 of u1 == 1 into +0.0.
    const double r = sqrt_rn(log_positive(u1) * -2.0 + 0.0);

    // theta = q pi/2 + phi, q = top 2 of the 53 bits, phi in [-pi/4, pi/4):
    // rotating (cos phi, sin phi) by q quarter turns is exact (swap, negate).
    const std::uint64_t k2 = w2 >> 11;
    const std::uint64_t q = k2 >> 51;
    const double phi = (small_to_double(k2 & ((1ull << 51) - 1)) * 0x1p-51 - 0.5) * kPiOver2;
    double s, c;
    sincos_small(phi, s, c);
    // Selects as bit masks: written with ?:, GCC kept branches in the AVX2 and
    // SSE2 loops and left them scalar.
    const std::uint64_t swap = 0 - (q & 1);  // all ones for q = 1, 3
    const std::uint64_t sb = to_bits(s), cb = to_bits(c);
    const std::uint64_t neg_cos = (q ^ (q >> 1)) & 1;  // q = 1, 2
    const std::uint64_t neg_sin = q >> 1;              // q = 2, 3
    const double cos_theta = from_bits(((cb & ~swap) | (sb & swap)) ^ (neg_cos << 63));
    const double sin_theta = from_bits(((sb & ~swap) | (cb & swap)) ^ (neg_sin << 63));
    z0 = r * cos_theta;
    z1 = r * sin_theta;
}

VFLSEC_HD bool is_finite_bits(double v) {
    return (to_bits(v) & 0x7ff0000000000000ull) != 0x7ff0000000000000ull;
}

}  // namespace vflsec::box_muller
