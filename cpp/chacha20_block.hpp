// The ChaCha20 block function (RFC 8439, section 2.3), shared by the CPU
// kernels (cpp/chacha20.hpp builds its SIMD form from the same rounds) and
// the CUDA kernels (cpp/cuda/noise.cu): one definition of the constants, the
// quarter round and the scalar block, compiled by g++ and by nvcc.
//
// State layout: words 0-3 constants, 4-11 key, 12-13 a 64-bit block counter
// (low word first), 14-15 a 64-bit stream id. This is Bernstein's original
// 64/64 layout; the RFC's 32-bit counter + 96-bit nonce fills the same four
// words, so the RFC's test vectors test this block function unchanged.
#pragma once

#include <cstdint>

#include "host_device.hpp"

namespace vflsec::chacha20 {

constexpr int kWordsPerBlock = 16;
constexpr int kBytesPerBlock = 64;
// "expand 32-byte k" (scalars: nvcc cannot read a host constexpr array in device code)
constexpr std::uint32_t kSigma0 = 0x61707865u, kSigma1 = 0x3320646eu, kSigma2 = 0x79622d32u,
                        kSigma3 = 0x6b206574u;

// The quarter round and the 20 rounds (10 double rounds) on 16 state
// variables x##0 .. x##15, with VFLSEC_ROTL(v, n) defined by the user: a
// scalar rotate here, a GCC vector rotate in chacha20.hpp's lane form.
#define VFLSEC_CHACHA_QR(a, b, c, d)                   \
    do {                                               \
        a += b; d ^= a; d = VFLSEC_ROTL(d, 16);        \
        c += d; b ^= c; b = VFLSEC_ROTL(b, 12);        \
        a += b; d ^= a; d = VFLSEC_ROTL(d, 8);         \
        c += d; b ^= c; b = VFLSEC_ROTL(b, 7);         \
    } while (0)

#define VFLSEC_CHACHA_20_ROUNDS(x)                                       \
    for (int round = 0; round < 10; ++round) {                           \
        VFLSEC_CHACHA_QR(x##0, x##4, x##8, x##12);                       \
        VFLSEC_CHACHA_QR(x##1, x##5, x##9, x##13);                       \
        VFLSEC_CHACHA_QR(x##2, x##6, x##10, x##14);                      \
        VFLSEC_CHACHA_QR(x##3, x##7, x##11, x##15);                      \
        VFLSEC_CHACHA_QR(x##0, x##5, x##10, x##15);                      \
        VFLSEC_CHACHA_QR(x##1, x##6, x##11, x##12);                      \
        VFLSEC_CHACHA_QR(x##2, x##7, x##8, x##13);                       \
        VFLSEC_CHACHA_QR(x##3, x##4, x##9, x##14);                       \
    }

VFLSEC_HD std::uint32_t rotl32(std::uint32_t v, int n) { return (v << n) | (v >> (32 - n)); }

// One 64-byte block as 16 little-endian words from the 8 key words and the
// state's words 12..15 (counter and stream id, or the RFC's counter and nonce).
VFLSEC_HD void block(const std::uint32_t (&key)[8], std::uint32_t w12, std::uint32_t w13, std::uint32_t w14,
                     std::uint32_t w15, std::uint32_t (&out)[16]) {
    std::uint32_t s0 = kSigma0, s1 = kSigma1, s2 = kSigma2, s3 = kSigma3;
    std::uint32_t s4 = key[0], s5 = key[1], s6 = key[2], s7 = key[3];
    std::uint32_t s8 = key[4], s9 = key[5], s10 = key[6], s11 = key[7];
    std::uint32_t s12 = w12, s13 = w13, s14 = w14, s15 = w15;
#define VFLSEC_ROTL(v, n) rotl32(v, n)
#if defined(__CUDA_ARCH__)  // the device pass; g++ (host pass included) does not know the pragma
#pragma unroll
#endif
    VFLSEC_CHACHA_20_ROUNDS(s)
#undef VFLSEC_ROTL
    // Feed-forward: add the input state back.
    out[0] = s0 + kSigma0; out[1] = s1 + kSigma1; out[2] = s2 + kSigma2; out[3] = s3 + kSigma3;
    out[4] = s4 + key[0]; out[5] = s5 + key[1]; out[6] = s6 + key[2]; out[7] = s7 + key[3];
    out[8] = s8 + key[4]; out[9] = s9 + key[5]; out[10] = s10 + key[6]; out[11] = s11 + key[7];
    out[12] = s12 + w12; out[13] = s13 + w13; out[14] = s14 + w14; out[15] = s15 + w15;
}

// Block `counter` of stream `stream_id` (the 64/64 layout above).
VFLSEC_HD void block_at(const std::uint32_t (&key)[8], std::uint64_t stream_id, std::uint64_t counter,
                        std::uint32_t (&out)[16]) {
    block(key, static_cast<std::uint32_t>(counter), static_cast<std::uint32_t>(counter >> 32),
          static_cast<std::uint32_t>(stream_id), static_cast<std::uint32_t>(stream_id >> 32), out);
}

}  // namespace vflsec::chacha20
