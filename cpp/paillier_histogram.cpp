// SecureBoost's encrypted histograms (see paillier_histogram.hpp).
#include "paillier_histogram.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "paillier_digits.hpp"
#include "paillier_fixed_base.hpp"
#include "paillier_ifma.hpp"
#include "parallel.hpp"

namespace vflsec::paillier {

using namespace digits;  // NOLINT(google-build-using-namespace): the kernels' shared helpers

void CiphertextRows::Free::operator()(std::uint64_t* p) const { std::free(p); }

CiphertextRows::CiphertextRows(const std::uint8_t* n, std::size_t n_len, const std::uint8_t* ciphertexts,
                               std::size_t bytes) {
    if (!ifma::available())
        throw std::runtime_error("the native Paillier kernel needs a CPU with AVX-512F and AVX-512 IFMA");
    if (n_len == 0 || n_len > static_cast<std::size_t>(FixedBaseTable::kMaxModulusBits / 8))
        throw std::invalid_argument("n must have 1 to " + std::to_string(FixedBaseTable::kMaxModulusBits / 8) +
                                    " bytes");
    const std::size_t limbs_n = (n_len + 7) / 8;
    Buffer n64(alloc_words(limbs_n));
    limbs_from_le(n, n_len, n64.get(), limbs_n);
    const int k = bit_length(n64.get(), limbs_n);
    if (k < 2 || (n64[0] & 1) == 0) throw std::invalid_argument("n must be odd and greater than 1");
    if (n_len != static_cast<std::size_t>((k + 7) / 8))
        throw std::invalid_argument("n must be given in ceil(bits / 8) bytes, without leading zero bytes");
    limbs_N_ = 2 * limbs_n;
    Buffer N64(alloc_words(limbs_N_));
    mul_limbs(n64.get(), limbs_n, n64.get(), limbs_n, N64.get());
    ciphertext_bytes_ = static_cast<std::size_t>((2 * k + 7) / 8);
    if (bytes % ciphertext_bytes_ != 0)
        throw std::invalid_argument("ciphertexts have " + std::to_string(bytes) + " bytes, not a multiple of " +
                                    std::to_string(ciphertext_bytes_));
    const std::size_t count = bytes / ciphertext_bytes_;
    count_ = count;

    const Montgomery mont(N64.get(), limbs_N_);
    L_ = mont.L;
    k0_ = mont.k0;
    const std::size_t L = static_cast<std::size_t>(L_);
    N52_.reset(alloc_words(L));
    std::memcpy(N52_.get(), mont.N52, L * sizeof(u64));

    // Every ciphertext checked (0 < c < N) before any work.
    Buffer limbs(alloc_words(limbs_N_));
    for (std::size_t i = 0; i < count; ++i) {
        limbs_from_le(ciphertexts + i * ciphertext_bytes_, ciphertext_bytes_, limbs.get(), limbs_N_);
        if (bit_length(limbs.get(), limbs_N_) == 0 || cmp_limbs(limbs.get(), N64.get(), limbs_N_) >= 0)
            throw std::invalid_argument("ciphertext must be in (0, n^2) (item " + std::to_string(i) + ")");
    }

    Buffer rr(alloc_words(L * kLanes)), lanes(alloc_words(L * kLanes)), work(alloc_words(ifma::scratch_words(L_)));
    broadcast(mont.RR, L_, rr.get());
    {  // R mod N = Montgomery(R^2, 1)
        Buffer unit(alloc_words(L * kLanes));
        for (int l = 0; l < kLanes; ++l) unit[l] = 1;
        ifma::amm8(lanes.get(), rr.get(), unit.get(), N52_.get(), k0_, L_, work.get());
        one_.reset(alloc_words(L));
        for (std::size_t j = 0; j < L; ++j) one_[j] = lanes[j * kLanes];
    }
    // c R mod N = Montgomery(c, R^2), eight rows at a time; stored row by row.
    rows_.reset(alloc_words(count * L));
    for (std::size_t g = 0; g < count; g += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
            const std::size_t i = g + l < count ? g + l : count - 1;
            limbs_from_le(ciphertexts + i * ciphertext_bytes_, ciphertext_bytes_, limbs.get(), limbs_N_);
            limbs_to_digits(limbs.get(), limbs_N_, lanes.get() + l, L_, kLanes);
        }
        ifma::amm8(lanes.get(), lanes.get(), rr.get(), N52_.get(), k0_, L_, work.get());
        for (int l = 0; l < kLanes && g + l < count; ++l)
            for (std::size_t j = 0; j < L; ++j) rows_[(g + l) * L + j] = lanes[j * kLanes + l];
    }
}

CiphertextRows::~CiphertextRows() = default;

void CiphertextRows::histogram(const std::int64_t* rows, std::size_t m, const std::uint8_t* codes,
                               std::size_t features, const std::int64_t* offsets, std::size_t bins,
                               std::uint8_t* out) const {
    const std::size_t L = static_cast<std::size_t>(L_);
    for (std::size_t i = 0; i < m; ++i)
        if (rows[i] < 0 || static_cast<std::size_t>(rows[i]) >= count_)
            throw std::invalid_argument("row index out of range (item " + std::to_string(i) + ")");
    for (std::size_t j = 0; j < features; ++j)
        if (offsets[j] < 0 || static_cast<std::size_t>(offsets[j]) >= bins)
            throw std::invalid_argument("feature offset out of range (feature " + std::to_string(j) + ")");
    for (std::size_t i = 0; i < m; ++i) {
        const std::uint8_t* code = codes + static_cast<std::size_t>(rows[i]) * features;
        for (std::size_t j = 0; j < features; ++j)
            if (static_cast<std::size_t>(offsets[j]) + code[j] >= bins)
                throw std::invalid_argument("a row's bin is beyond the histogram (row " + std::to_string(rows[i]) +
                                            ", feature " + std::to_string(j) + ")");
    }

    Buffer acc(alloc_words(bins * L));
    for (std::size_t b = 0; b < bins; ++b) std::memcpy(acc.get() + b * L, one_.get(), L * sizeof(u64));
    const std::size_t groups = (features + kLanes - 1) / kLanes;
    const int threads = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(num_threads()), groups));
#pragma omp parallel num_threads(threads > 0 ? threads : 1)
    {
        Buffer lanes(alloc_words(L * kLanes)), row(alloc_words(L * kLanes)), work(alloc_words(ifma::scratch_words(L_)));
        Buffer spare(alloc_words(L * (kLanes - 1)));  // accumulators of the missing features of a last group
#pragma omp for schedule(dynamic, 1)
        for (std::size_t grp = 0; grp < groups; ++grp) {
            const std::size_t first = grp * kLanes;
            const int width = static_cast<int>(std::min<std::size_t>(kLanes, features - first));
            u64* targets[kLanes];
            for (std::size_t i = 0; i < m; ++i) {
                const std::size_t r = static_cast<std::size_t>(rows[i]);
                const std::uint8_t* code = codes + r * features + first;
                const u64* c = rows_.get() + r * L;
                for (int l = 0; l < kLanes; ++l) {
                    targets[l] = l < width ? acc.get() + (static_cast<std::size_t>(offsets[first + l]) + code[l]) * L
                                           : spare.get() + static_cast<std::size_t>(l - 1) * L;
                    for (std::size_t j = 0; j < L; ++j) {
                        lanes[j * kLanes + l] = targets[l][j];
                        row[j * kLanes + l] = c[j];
                    }
                }
                ifma::amm8(lanes.get(), lanes.get(), row.get(), N52_.get(), k0_, L_, work.get());
                for (int l = 0; l < width; ++l)
                    for (std::size_t j = 0; j < L; ++j) targets[l][j] = lanes[j * kLanes + l];
            }
        }
    }

    // Out of Montgomery form (a product with 1), reduced below N, eight bins at a time.
    Buffer lanes(alloc_words(L * kLanes)), unit(alloc_words(L * kLanes)), work(alloc_words(ifma::scratch_words(L_)));
    Buffer limbs(alloc_words(limbs_N_));
    for (int l = 0; l < kLanes; ++l) unit[l] = 1;
    for (std::size_t b0 = 0; b0 < bins; b0 += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
            const std::size_t b = b0 + l < bins ? b0 + l : bins - 1;
            for (std::size_t j = 0; j < L; ++j) lanes[j * kLanes + l] = acc[b * L + j];
        }
        ifma::amm8(lanes.get(), lanes.get(), unit.get(), N52_.get(), k0_, L_, work.get());
        for (int l = 0; l < kLanes && b0 + l < bins; ++l) {
            reduce_lane(lanes.get() + l, N52_.get(), L_);
            digits_to_limbs(lanes.get() + l, L_, kLanes, limbs.get(), limbs_N_);
            limbs_to_le(limbs.get(), out + (b0 + l) * ciphertext_bytes_, ciphertext_bytes_);
        }
    }
}

void CiphertextRows::pack(const std::uint8_t* ciphertexts, std::size_t count, int slots, int width,
                          std::uint8_t* out) const {
    if (slots < 1 || width < 1 || static_cast<long long>(slots) * width > 2 * 52 * static_cast<long long>(L_))
        throw std::invalid_argument("slots and width must be positive, slots * width within the modulus");
    const std::size_t L = static_cast<std::size_t>(L_), cb = ciphertext_bytes_;
    Buffer N64(alloc_words(limbs_N_)), limbs(alloc_words(limbs_N_));
    digits_to_limbs(N52_.get(), L_, 1, N64.get(), limbs_N_);
    for (std::size_t i = 0; i < count; ++i) {
        limbs_from_le(ciphertexts + i * cb, cb, limbs.get(), limbs_N_);
        if (bit_length(limbs.get(), limbs_N_) == 0 || cmp_limbs(limbs.get(), N64.get(), limbs_N_) >= 0)
            throw std::invalid_argument("ciphertext must be in (0, n^2) (item " + std::to_string(i) + ")");
    }
    const std::size_t groups = (count + static_cast<std::size_t>(slots) - 1) / static_cast<std::size_t>(slots);
    const std::size_t blocks = (groups + kLanes - 1) / kLanes;
    const Montgomery mont(N64.get(), limbs_N_);  // R^2 mod N (once per call: 2 * 52 L doublings, negligible)
    const int threads = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(num_threads()), blocks));
#pragma omp parallel num_threads(threads > 0 ? threads : 1)
    {
        Buffer acc(alloc_words(L * kLanes)), operand(alloc_words(L * kLanes)), rr(alloc_words(L * kLanes));
        Buffer unit(alloc_words(L * kLanes)), work(alloc_words(ifma::scratch_words(L_))), own(alloc_words(limbs_N_));
        broadcast(mont.RR, L_, rr.get());
        for (int l = 0; l < kLanes; ++l) unit[l] = 1;
        // Lane l of block b packs group 8 b + l; slot i of a group is ciphertext slots * group + i.
        auto load = [&](u64* lanes, std::size_t block, int slot) {
            for (int l = 0; l < kLanes; ++l) {
                const std::size_t group = block * kLanes + static_cast<std::size_t>(l);
                const std::size_t item = group * static_cast<std::size_t>(slots) + static_cast<std::size_t>(slot);
                if (group < groups && item < count) {
                    limbs_from_le(ciphertexts + item * cb, cb, own.get(), limbs_N_);
                    limbs_to_digits(own.get(), limbs_N_, lanes + l, L_, kLanes);
                } else {  // a missing slot: 1 (the trivial encryption of 0)
                    for (std::size_t j = 0; j < L; ++j) lanes[j * kLanes + l] = j == 0;
                }
            }
            ifma::amm8(lanes, lanes, rr.get(), N52_.get(), k0_, L_, work.get());  // to Montgomery form
        };
#pragma omp for schedule(dynamic, 1)
        for (std::size_t block = 0; block < blocks; ++block) {
            load(acc.get(), block, slots - 1);
            for (int slot = slots - 2; slot >= 0; --slot) {
                for (int s = 0; s < width; ++s) ifma::amm8(acc.get(), acc.get(), acc.get(), N52_.get(), k0_, L_, work.get());
                load(operand.get(), block, slot);
                ifma::amm8(acc.get(), acc.get(), operand.get(), N52_.get(), k0_, L_, work.get());
            }
            ifma::amm8(acc.get(), acc.get(), unit.get(), N52_.get(), k0_, L_, work.get());  // out of Montgomery form
            for (int l = 0; l < kLanes; ++l) {
                const std::size_t group = block * kLanes + static_cast<std::size_t>(l);
                if (group >= groups) break;
                reduce_lane(acc.get() + l, N52_.get(), L_);
                digits_to_limbs(acc.get() + l, L_, kLanes, own.get(), limbs_N_);
                limbs_to_le(own.get(), out + group * cb, cb);
            }
        }
    }
}

}  // namespace vflsec::paillier
