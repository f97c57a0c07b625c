// ChaCha20 block function (RFC 8439, section 2.3) in two forms:
//  * block_reference: one block, plain scalar code, checked against the RFC's
//    test vectors;
//  * blocks_lanes<L>: L consecutive blocks at once, each state word held as
//    one GCC vector of L uint32 lanes (lane j = block counter + j), so that a
//    caller compiled for AVX-512 / AVX2 / SSE2 gets 16 / 8 / 4 blocks per
//    instruction. The result of a block never depends on L.
//
// State layout: words 0-3 constants, 4-11 key, 12-13 a 64-bit block counter
// (low word first), 14-15 a 64-bit stream id. This is Bernstein's original
// 64/64 layout; the RFC's 32-bit counter + 96-bit nonce fills the same four
// words, so the RFC vectors test this block function unchanged.
#pragma once

#include <cstdint>
#include <cstring>

#define VFLSEC_ALWAYS_INLINE inline __attribute__((always_inline))

namespace vflsec::chacha20 {

constexpr int kWordsPerBlock = 16;
constexpr int kBytesPerBlock = 64;
constexpr uint32_t kSigma[4] = {0x61707865u, 0x3320646eu, 0x79622d32u, 0x6b206574u};  // "expand 32-byte k"

struct Key {
    uint32_t w[8];
};

// Little-endian load, independent of the host byte order.
inline uint32_t load_le32(const uint8_t* p) {
    return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
           (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

inline Key key_from_bytes(const uint8_t bytes[32]) {
    Key k;
    for (int i = 0; i < 8; ++i) k.w[i] = load_le32(bytes + 4 * i);
    return k;
}

inline uint32_t rotl32(uint32_t v, int n) { return (v << n) | (v >> (32 - n)); }

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

// One 64-byte block as 16 little-endian words; `words12_15` are the state's
// words 12..15 (counter and stream id, or the RFC's counter and nonce).
inline void block_reference(const Key& key, const uint32_t words12_15[4], uint32_t out[16]) {
    uint32_t in[16];
    for (int i = 0; i < 4; ++i) in[i] = kSigma[i];
    for (int i = 0; i < 8; ++i) in[4 + i] = key.w[i];
    for (int i = 0; i < 4; ++i) in[12 + i] = words12_15[i];
    uint32_t s0 = in[0], s1 = in[1], s2 = in[2], s3 = in[3], s4 = in[4], s5 = in[5], s6 = in[6],
             s7 = in[7], s8 = in[8], s9 = in[9], s10 = in[10], s11 = in[11], s12 = in[12],
             s13 = in[13], s14 = in[14], s15 = in[15];
#define VFLSEC_ROTL(v, n) rotl32(v, n)
    VFLSEC_CHACHA_20_ROUNDS(s)
#undef VFLSEC_ROTL
    const uint32_t s[16] = {s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15};
    for (int i = 0; i < 16; ++i) out[i] = s[i] + in[i];
}

// One GCC vector of L uint32 lanes (non-dependent typedefs: GCC 12 cannot
// instantiate a vector_size that depends on a template parameter).
template <int L>
struct LaneVector;
template <>
struct LaneVector<4> {
    typedef uint32_t type __attribute__((vector_size(16)));
};
template <>
struct LaneVector<8> {
    typedef uint32_t type __attribute__((vector_size(32)));
};
template <>
struct LaneVector<16> {
    typedef uint32_t type __attribute__((vector_size(64)));
};

// Blocks counter, counter+1, ..., counter+L-1 of stream `stream_id`;
// out[i][j] is word i of block counter+j. The caller guarantees that
// counter + L - 1 does not wrap (the generator reserves counters first).
template <int L>
VFLSEC_ALWAYS_INLINE void blocks_lanes(const Key& key, uint64_t stream_id, uint64_t counter,
                                       uint32_t (&out)[16][L]) {
    typedef typename LaneVector<L>::type V;
    const V zero = {};
    uint32_t lo[L], hi[L];
    for (int j = 0; j < L; ++j) {
        const uint64_t c = counter + static_cast<uint64_t>(j);
        lo[j] = static_cast<uint32_t>(c);
        hi[j] = static_cast<uint32_t>(c >> 32);
    }
    V ctr_lo, ctr_hi;
    std::memcpy(&ctr_lo, lo, sizeof ctr_lo);
    std::memcpy(&ctr_hi, hi, sizeof ctr_hi);
    const uint32_t id_lo = static_cast<uint32_t>(stream_id);
    const uint32_t id_hi = static_cast<uint32_t>(stream_id >> 32);

    V x0 = zero + kSigma[0], x1 = zero + kSigma[1], x2 = zero + kSigma[2], x3 = zero + kSigma[3];
    V x4 = zero + key.w[0], x5 = zero + key.w[1], x6 = zero + key.w[2], x7 = zero + key.w[3];
    V x8 = zero + key.w[4], x9 = zero + key.w[5], x10 = zero + key.w[6], x11 = zero + key.w[7];
    V x12 = ctr_lo, x13 = ctr_hi, x14 = zero + id_lo, x15 = zero + id_hi;
#define VFLSEC_ROTL(v, n) (((v) << (n)) | ((v) >> (32 - (n))))
    VFLSEC_CHACHA_20_ROUNDS(x)
#undef VFLSEC_ROTL
    // Feed-forward: add the input state back.
    x0 += kSigma[0]; x1 += kSigma[1]; x2 += kSigma[2]; x3 += kSigma[3];
    x4 += key.w[0]; x5 += key.w[1]; x6 += key.w[2]; x7 += key.w[3];
    x8 += key.w[4]; x9 += key.w[5]; x10 += key.w[6]; x11 += key.w[7];
    x12 += ctr_lo; x13 += ctr_hi; x14 += id_lo; x15 += id_hi;
    const V* rows[16] = {&x0, &x1, &x2, &x3, &x4, &x5, &x6, &x7,
                         &x8, &x9, &x10, &x11, &x12, &x13, &x14, &x15};
    for (int i = 0; i < 16; ++i) std::memcpy(out[i], rows[i], sizeof(V));
}

#undef VFLSEC_CHACHA_QR
#undef VFLSEC_CHACHA_20_ROUNDS

}  // namespace vflsec::chacha20
