// ChaCha20 block function (RFC 8439, section 2.3) on the CPU, in two forms:
//  * block_reference: one block, plain scalar code (chacha20_block.hpp, the
//    very function the CUDA kernels run), checked against the RFC's test
//    vectors;
//  * blocks_lanes<L>: L consecutive blocks at once, each state word held as
//    one GCC vector of L uint32 lanes (lane j = block counter + j), so that a
//    caller compiled for AVX-512 / AVX2 / SSE2 gets 16 / 8 / 4 blocks per
//    instruction. The result of a block never depends on L.
//
// The state layout (64-bit counter, 64-bit stream id) is chacha20_block.hpp's.
#pragma once

#include <cstdint>
#include <cstring>

#include "chacha20_block.hpp"
#include "host_device.hpp"

namespace vflsec::chacha20 {

constexpr uint32_t kSigma[4] = {kSigma0, kSigma1, kSigma2, kSigma3};

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

// One 64-byte block as 16 little-endian words; `words12_15` are the state's
// words 12..15 (counter and stream id, or the RFC's counter and nonce).
inline void block_reference(const Key& key, const uint32_t words12_15[4], uint32_t out[16]) {
    block(key.w, words12_15[0], words12_15[1], words12_15[2], words12_15[3],
          *reinterpret_cast<uint32_t(*)[16]>(out));
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

}  // namespace vflsec::chacha20
