// SecureBoost's encrypted histograms on the CPU (AVX-512 IFMA).
//
// A round's ciphertexts (one per row, Paillier mod N = n^2) are converted once
// to Montgomery form (CiphertextRows); histogram() then gives, for a node's rows
// and their bin codes, every bin's product of the ciphertexts of its rows mod N
// (a ciphertext product adds the plaintexts: the bin's sum). A row's ciphertext
// enters one bin per feature; eight features are multiplied at once, one per
// lane of the IFMA Montgomery product (paillier_ifma.hpp), their accumulators
// gathered and scattered around it; OpenMP threads take disjoint groups of
// eight features. An empty bin gives 1 (the trivial encryption of 0).
//
// Numbers cross this interface as little-endian byte strings: n as
// ceil(k / 8) bytes, ciphertexts and results as ceil(2 k / 8). Nothing here is
// secret (ciphertexts and a public modulus). Requires AVX-512F and AVX-512
// IFMA (fixed_base_available()); the constructor throws std::runtime_error
// elsewhere. Invalid arguments throw std::invalid_argument.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace vflsec::paillier {

class CiphertextRows {
public:
    // ciphertexts: bytes of whole ciphertexts, ciphertext_bytes() each (their count is bytes / that).
    CiphertextRows(const std::uint8_t* n, std::size_t n_len, const std::uint8_t* ciphertexts, std::size_t bytes);
    ~CiphertextRows();
    CiphertextRows(const CiphertextRows&) = delete;
    CiphertextRows& operator=(const CiphertextRows&) = delete;

    std::size_t count() const { return count_; }
    std::size_t ciphertext_bytes() const { return ciphertext_bytes_; }

    // rows: m row indices (< count); codes: count x features bin codes, row-major; offsets: each
    // feature's first bin; out: bins x ciphertext_bytes(). Every offsets[j] + code must be < bins.
    void histogram(const std::int64_t* rows, std::size_t m, const std::uint8_t* codes, std::size_t features,
                   const std::int64_t* offsets, std::size_t bins, std::uint8_t* out) const;

    // SecureBoost's slot packing: `count` ciphertexts (each < N) in groups of `slots`, each group as one
    // ciphertext prod_i c_i^(2^(width i)) mod N (Horner: width squarings per slot), eight groups per IFMA
    // product. out: ceil(count / slots) x ciphertext_bytes().
    void pack(const std::uint8_t* ciphertexts, std::size_t count, int slots, int width, std::uint8_t* out) const;

private:
    struct Free {
        void operator()(std::uint64_t* p) const;
    };
    using Buffer = std::unique_ptr<std::uint64_t[], Free>;

    std::size_t count_ = 0;
    std::size_t ciphertext_bytes_ = 0;
    std::size_t limbs_N_ = 0;
    int L_ = 0;
    std::uint64_t k0_ = 0;
    Buffer N52_;    // N's digits
    Buffer one_;    // R mod N (Montgomery 1), L digits
    Buffer rows_;   // count x L digits: each ciphertext c as c R mod N (< 2N)
};

}  // namespace vflsec::paillier
