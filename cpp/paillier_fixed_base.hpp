// Paillier DJN fixed-base encryption on the CPU (AVX-512 IFMA).
//
// For a public modulus n (k bits), N = n^2 and a fixed base hs (a unit mod N),
// a FixedBaseTable holds hs^(d 2^(w r)) mod N for every w-bit digit d and digit
// position r of an `exponent_bits`-bit exponent, in Montgomery form (radix
// 2^52, R = 2^(52 L), 4N < R). With it a batch computes
//   powers:      hs^alpha                mod N
//   encrypt:     (1 + n m) hs^alpha      mod N   (m < n)
//   rerandomize: c hs^alpha              mod N   (c < N)
// as one Montgomery product per digit position (a comb with no squarings),
// eight values at a time in the 64-bit lanes of AVX-512 IFMA, and one last
// product with the plain (1 + n m), c or 1, which also leaves Montgomery form.
//
// Numbers cross this interface as little-endian byte strings of fixed length:
// n and m as plaintext_bytes() = ceil(k / 8), hs, c and the results as
// ciphertext_bytes() = ceil(2 k / 8), each alpha as exponent_bytes() =
// ceil(exponent_bits / 8) with alpha < 2^exponent_bits. The exponents are the
// caller's secret random values: the copies this code makes (digits, table
// offsets, intermediate powers) are wiped before it returns. Table lookups are
// indexed by those digits, as in any table-driven exponentiation; the code is
// not constant-time with respect to cache timing.
//
// Requires a CPU with AVX-512F and AVX-512 IFMA (fixed_base_available());
// the constructor throws std::runtime_error elsewhere. Invalid arguments throw
// std::invalid_argument. A table is immutable after construction: batches may
// run concurrently on one table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace vflsec::paillier {

// True when this build has the IFMA kernel and this CPU runs it.
bool fixed_base_available();

class FixedBaseTable {
public:
    static constexpr int kMaxWindow = 12;
    static constexpr int kMaxModulusBits = 16384;  // bits of n
    static constexpr int kMaxExponentBits = 2 * kMaxModulusBits;

    FixedBaseTable(const std::uint8_t* n, std::size_t n_len, const std::uint8_t* hs, std::size_t hs_len,
                   int exponent_bits, int window);
    ~FixedBaseTable();
    FixedBaseTable(const FixedBaseTable&) = delete;
    FixedBaseTable& operator=(const FixedBaseTable&) = delete;

    int modulus_bits() const { return k_; }
    int exponent_bits() const { return exponent_bits_; }
    int window() const { return window_; }
    int rows() const { return rows_; }
    int digits() const { return L_; }  // 52-bit digits per number
    std::size_t plaintext_bytes() const { return static_cast<std::size_t>((k_ + 7) / 8); }
    std::size_t ciphertext_bytes() const { return static_cast<std::size_t>((2 * k_ + 7) / 8); }
    std::size_t exponent_bytes() const { return static_cast<std::size_t>((exponent_bits_ + 7) / 8); }
    std::size_t entries() const { return static_cast<std::size_t>(rows_) << window_; }
    std::size_t table_bytes() const { return entries() * static_cast<std::size_t>(L_) * sizeof(std::uint64_t); }

    // `count` values each; `out` receives count * ciphertext_bytes() bytes.
    void powers(const std::uint8_t* alphas, std::size_t count, std::uint8_t* out) const;
    void encrypt(const std::uint8_t* plaintexts, const std::uint8_t* alphas, std::size_t count,
                 std::uint8_t* out) const;
    void rerandomize(const std::uint8_t* ciphertexts, const std::uint8_t* alphas, std::size_t count,
                     std::uint8_t* out) const;

private:
    enum class Mode { kPower, kEncrypt, kRerandomize };
    void run(Mode mode, const std::uint8_t* in, const std::uint8_t* alphas, std::size_t count,
             std::uint8_t* out) const;

    struct Free {
        void operator()(std::uint64_t* p) const;
    };
    using Buffer = std::unique_ptr<std::uint64_t[], Free>;

    int k_ = 0;              // bits of n
    int exponent_bits_ = 0;
    int window_ = 0;
    int rows_ = 0;           // ceil(exponent_bits / window)
    int L_ = 0;              // 52-bit digits of N = n^2 (4N < 2^(52 L))
    std::size_t limbs_n_ = 0;   // 64-bit limbs of n
    std::size_t limbs_N_ = 0;   // 64-bit limbs of N
    std::uint64_t k0_ = 0;   // -N^-1 mod 2^52
    Buffer n64_;             // n, 64-bit limbs
    Buffer N64_;             // N, 64-bit limbs
    Buffer N52_;             // N, 52-bit digits
    Buffer table_;           // entries() entries of L digits, entry (r, d) at ((r << window) + d) * L
};

}  // namespace vflsec::paillier
