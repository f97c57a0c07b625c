// Internal interface of the AVX-512 IFMA arithmetic behind the Paillier
// fixed-base kernel (paillier_fixed_base.cpp is its only caller).
//
// Numbers modulo N (odd) are L digits of 52 bits, each in its own uint64.
// Eight numbers are processed together ("lanes"): an 8-lane value is stored
// digit-major, x[8 j + lane] being digit j of lane `lane`, so one 512-bit
// vector holds digit j of all eight. Buffers are 64-byte aligned.
//
// amm8 is an almost-Montgomery product: for a, b < 2N with 4N < R = 2^(52 L)
// it returns a b R^-1 mod N as a value < 2N with normalized (< 2^52) digits.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vflsec::paillier::ifma {

// Compiled in (x86-64 with a compiler that knows the target) and supported by this CPU.
bool available();

// Scratch space (uint64 words) that amm8 / comb8 need for L digits.
inline std::size_t scratch_words(int L) { return static_cast<std::size_t>(2 * L + 2) * 8; }

// res = a b R^-1 (lane-wise); res may alias a or b. N: L digits, k0 = -N^-1 mod 2^52.
void amm8(std::uint64_t* res, const std::uint64_t* a, const std::uint64_t* b, const std::uint64_t* N,
          std::uint64_t k0, int L, std::uint64_t* scratch);

// Fixed-base comb: acc = prod_r table[offsets[8 r + lane] .. + L) (Montgomery products, lane-wise),
// for r in [0, rows). `offsets` are entry offsets in uint64 words into `table`.
void comb8(std::uint64_t* acc, const std::uint64_t* table, const std::uint64_t* offsets, int rows,
           const std::uint64_t* N, std::uint64_t k0, int L, std::uint64_t* scratch);

}  // namespace vflsec::paillier::ifma
