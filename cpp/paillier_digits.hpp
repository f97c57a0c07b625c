// Internal helpers of the Paillier kernels (paillier_fixed_base.cpp and
// paillier_histogram.cpp): aligned word buffers that are wiped when freed, and
// the conversions between little-endian byte strings, 64-bit limbs and the
// 52-bit digits (one per uint64) of the IFMA arithmetic, with the 8-lane
// digit-major layout of paillier_ifma.hpp. Values modulo N are reduced here
// only once per value (the kernels' inner loops are the IFMA products).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#include "paillier_ifma.hpp"
#include "secure_zero.hpp"

namespace vflsec::paillier::digits {

using u64 = std::uint64_t;
using u128 = unsigned __int128;
constexpr u64 kMask52 = (u64{1} << 52) - 1;
constexpr int kLanes = 8;

inline u64* alloc_words(std::size_t words) {
    std::size_t bytes = (words * sizeof(u64) + 63) / 64 * 64;
    if (bytes == 0) bytes = 64;
    void* p = std::aligned_alloc(64, bytes);
    if (p == nullptr) throw std::bad_alloc();
    std::memset(p, 0, bytes);
    return static_cast<u64*>(p);
}

// Words that hold secrets (digits of alpha, powers of hs): wiped, then freed.
class Scratch {
public:
    explicit Scratch(std::size_t words) : words_(words), p_(alloc_words(words)) {}
    ~Scratch() {
        secure_zero(p_, words_ * sizeof(u64));
        std::free(p_);
    }
    Scratch(const Scratch&) = delete;
    Scratch& operator=(const Scratch&) = delete;
    u64* get() const { return p_; }

private:
    std::size_t words_;
    u64* p_;
};

inline void limbs_from_le(const std::uint8_t* p, std::size_t len, u64* out, std::size_t limbs) {
    for (std::size_t i = 0; i < limbs; ++i) out[i] = 0;
    for (std::size_t b = 0; b < len; ++b) out[b / 8] |= static_cast<u64>(p[b]) << (8 * (b % 8));
}

inline void limbs_to_le(const u64* x, std::uint8_t* out, std::size_t len) {
    for (std::size_t b = 0; b < len; ++b) out[b] = static_cast<std::uint8_t>(x[b / 8] >> (8 * (b % 8)));
}

inline int bit_length(const u64* x, std::size_t limbs) {
    for (std::size_t i = limbs; i-- > 0;)
        if (x[i] != 0) return static_cast<int>(64 * i) + 64 - __builtin_clzll(x[i]);
    return 0;
}

inline int cmp_limbs(const u64* a, const u64* b, std::size_t limbs) {
    for (std::size_t i = limbs; i-- > 0;)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return 0;
}

inline void sub_limbs(u64* a, const u64* b, std::size_t limbs) {  // a -= b (mod 2^(64 limbs))
    u64 borrow = 0;
    for (std::size_t i = 0; i < limbs; ++i) {
        const u64 t = a[i] - b[i];
        const u64 b1 = a[i] < b[i];
        a[i] = t - borrow;
        borrow = b1 | (t < borrow);
    }
}

// out[0, an + bn) = a b (schoolbook; once per key and once per encrypted value).
inline void mul_limbs(const u64* a, std::size_t an, const u64* b, std::size_t bn, u64* out) {
    for (std::size_t i = 0; i < an + bn; ++i) out[i] = 0;
    for (std::size_t i = 0; i < an; ++i) {
        u64 carry = 0;
        for (std::size_t j = 0; j < bn; ++j) {
            const u128 t = static_cast<u128>(a[i]) * b[j] + out[i + j] + carry;
            out[i + j] = static_cast<u64>(t);
            carry = static_cast<u64>(t >> 64);
        }
        out[i + bn] = carry;
    }
}

// 52-bit digits d[j * stride] (j < L) of a value given as 64-bit limbs, and back.
inline void limbs_to_digits(const u64* x, std::size_t limbs, u64* d, int L, std::size_t stride) {
    for (int j = 0; j < L; ++j) {
        const std::size_t bit = 52 * static_cast<std::size_t>(j);
        const std::size_t w = bit / 64;
        const unsigned s = bit % 64;
        u64 v = w < limbs ? x[w] >> s : 0;
        if (s > 12 && w + 1 < limbs) v |= x[w + 1] << (64 - s);
        d[j * stride] = v & kMask52;
    }
}

inline void digits_to_limbs(const u64* d, int L, std::size_t stride, u64* x, std::size_t limbs) {
    for (std::size_t i = 0; i < limbs; ++i) x[i] = 0;
    for (int j = 0; j < L; ++j) {
        const std::size_t bit = 52 * static_cast<std::size_t>(j);
        const std::size_t w = bit / 64;
        const unsigned s = bit % 64;
        const u64 v = d[j * stride];
        if (w < limbs) x[w] |= v << s;
        if (s > 12 && w + 1 < limbs) x[w + 1] |= v >> (64 - s);
    }
}

// A lane's value (normalized digits, < 2N) reduced below N.
inline void reduce_lane(u64* d, const u64* N52, int L) {
    for (int j = L; j-- > 0;) {
        const u64 a = d[j * kLanes];
        if (a != N52[j]) {
            if (a < N52[j]) return;
            break;
        }
    }
    u64 borrow = 0;
    for (int j = 0; j < L; ++j) {
        const u64 t = d[j * kLanes] - N52[j] - borrow;  // wraps when negative
        borrow = t >> 63;
        d[j * kLanes] = t & kMask52;
    }
}

inline void broadcast(const u64* single, int L, u64* lanes) {
    for (int j = 0; j < L; ++j)
        for (int l = 0; l < kLanes; ++l) lanes[j * kLanes + l] = single[j];
}

// The Montgomery setting of a modulus N given as 64-bit limbs: its L digits (4N < R = 2^(52 L)),
// k0 = -N^-1 mod 2^52 and R^2 mod N as digits (computed by doubling 1, 2 * 52 L times).
struct Montgomery {
    int L = 0;
    u64 k0 = 0;
    u64* N52 = nullptr;  // L digits
    u64* RR = nullptr;   // L digits

    Montgomery(const u64* N64, std::size_t limbs) {
        L = (bit_length(N64, limbs) + 2 + 51) / 52;
        N52 = alloc_words(static_cast<std::size_t>(L));
        RR = alloc_words(static_cast<std::size_t>(L));
        limbs_to_digits(N64, limbs, N52, L, 1);
        u64 inv = N64[0];  // N^-1 mod 2^64 by Newton's iteration (each step doubles the correct bits)
        for (int i = 0; i < 6; ++i) inv *= 2 - N64[0] * inv;
        k0 = (0 - inv) & kMask52;
        u64* x = alloc_words(limbs + 1);
        x[0] = 1;
        for (std::size_t i = 0; i < 2 * 52 * static_cast<std::size_t>(L); ++i) {
            const u64 top = x[limbs - 1] >> 63;
            for (std::size_t w = limbs; w-- > 1;) x[w] = (x[w] << 1) | (x[w - 1] >> 63);
            x[0] <<= 1;
            if (top || cmp_limbs(x, N64, limbs) >= 0) sub_limbs(x, N64, limbs);
        }
        limbs_to_digits(x, limbs, RR, L, 1);
        std::free(x);
    }
    ~Montgomery() {
        std::free(N52);
        std::free(RR);
    }
    Montgomery(const Montgomery&) = delete;
    Montgomery& operator=(const Montgomery&) = delete;
};

}  // namespace vflsec::paillier::digits
