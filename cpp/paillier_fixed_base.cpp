// Paillier DJN fixed-base encryption (see paillier_fixed_base.hpp): the
// table, the byte and digit conversions and the batching around the AVX-512
// IFMA products of paillier_ifma.cpp. The scalar arithmetic here (n^2, R^2 mod
// N, 1 + n m, the final reduction) runs once per key or once per value.
#include "paillier_fixed_base.hpp"

#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#include "paillier_digits.hpp"
#include "paillier_ifma.hpp"
#include "secure_zero.hpp"

namespace vflsec::paillier {
namespace {

using namespace digits;  // NOLINT(google-build-using-namespace): the kernels' shared helpers

// Bits [pos, pos + width) of a little-endian byte string (width <= 16).
unsigned bits_at(const std::uint8_t* p, std::size_t len, std::size_t pos, int width) {
    std::uint32_t v = 0;
    const std::size_t byte = pos / 8;
    for (std::size_t i = 0; i < 3 && byte + i < len; ++i) v |= static_cast<std::uint32_t>(p[byte + i]) << (8 * i);
    return (v >> (pos % 8)) & ((1u << width) - 1);
}

}  // namespace

bool fixed_base_available() { return ifma::available(); }

void FixedBaseTable::Free::operator()(std::uint64_t* p) const { std::free(p); }

FixedBaseTable::FixedBaseTable(const std::uint8_t* n, std::size_t n_len, const std::uint8_t* hs,
                               std::size_t hs_len, int exponent_bits, int window) {
    if (window < 1 || window > kMaxWindow)
        throw std::invalid_argument("window must be in [1, " + std::to_string(kMaxWindow) + "]");
    if (exponent_bits < 1 || exponent_bits > kMaxExponentBits)
        throw std::invalid_argument("exponent_bits must be in [1, " + std::to_string(kMaxExponentBits) + "]");
    if (n_len == 0 || n_len > static_cast<std::size_t>(kMaxModulusBits / 8))
        throw std::invalid_argument("n must have 1 to " + std::to_string(kMaxModulusBits / 8) + " bytes");
    if (!ifma::available())
        throw std::runtime_error("the native Paillier kernel needs a CPU with AVX-512F and AVX-512 IFMA");

    limbs_n_ = (n_len + 7) / 8;
    n64_.reset(alloc_words(limbs_n_));
    limbs_from_le(n, n_len, n64_.get(), limbs_n_);
    k_ = bit_length(n64_.get(), limbs_n_);
    if (k_ < 2 || (n64_[0] & 1) == 0) throw std::invalid_argument("n must be odd and greater than 1");
    if (n_len != plaintext_bytes())
        throw std::invalid_argument("n must be given in ceil(bits / 8) bytes, without leading zero bytes");
    exponent_bits_ = exponent_bits;
    window_ = window;
    rows_ = (exponent_bits + window - 1) / window;

    limbs_N_ = 2 * limbs_n_;
    N64_.reset(alloc_words(limbs_N_));
    mul_limbs(n64_.get(), limbs_n_, n64_.get(), limbs_n_, N64_.get());
    const Montgomery mont(N64_.get(), limbs_N_);  // 4N < R = 2^(52 L)
    L_ = mont.L;
    k0_ = mont.k0;
    N52_.reset(alloc_words(static_cast<std::size_t>(L_)));
    std::memcpy(N52_.get(), mont.N52, static_cast<std::size_t>(L_) * sizeof(u64));

    if (hs_len != ciphertext_bytes()) throw std::invalid_argument("hs must be given in ceil(2 bits / 8) bytes");
    const std::size_t L = static_cast<std::size_t>(L_);
    Scratch limbs(limbs_N_ + 1);
    limbs_from_le(hs, hs_len, limbs.get(), limbs_N_);
    if (bit_length(limbs.get(), limbs_N_) == 0 || cmp_limbs(limbs.get(), N64_.get(), limbs_N_) >= 0)
        throw std::invalid_argument("hs must be in [1, n^2)");

    const u64* N52 = N52_.get();
    Scratch lanes_hs(L * kLanes), rr(L * kLanes), one(L * kLanes), work(ifma::scratch_words(L_));
    {
        Scratch single(L);
        limbs_to_digits(limbs.get(), limbs_N_, single.get(), L_, 1);
        broadcast(single.get(), L_, lanes_hs.get());
        broadcast(mont.RR, L_, rr.get());  // R^2 mod N
        for (std::size_t j = 0; j < L * kLanes; ++j) one.get()[j] = j < kLanes ? 1 : 0;
    }
    // Montgomery forms: R mod N (the digit-0 entries) and hs R mod N.
    Scratch one_m(L * kLanes), base(L * kLanes);
    ifma::amm8(one_m.get(), rr.get(), one.get(), N52, k0_, L_, work.get());
    ifma::amm8(base.get(), lanes_hs.get(), rr.get(), N52, k0_, L_, work.get());

    // The row bases hs^(2^(w r)) R, one per row (w squarings apart; all lanes equal).
    const std::size_t rows = static_cast<std::size_t>(rows_);
    Scratch bases(rows * L);
    for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t j = 0; j < L; ++j) bases.get()[r * L + j] = base.get()[j * kLanes];
        if (r + 1 < rows)
            for (int s = 0; s < window_; ++s) ifma::amm8(base.get(), base.get(), base.get(), N52, k0_, L_, work.get());
    }

    // Rows eight at a time, one per lane: entry d = entry (d - 1) times the row's base.
    const std::size_t per_row = std::size_t{1} << window_;
    table_.reset(alloc_words(entries() * L));
    u64* table = table_.get();
    Scratch lanes_base(L * kLanes), cur(L * kLanes);
    for (std::size_t r0 = 0; r0 < rows; r0 += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
            const std::size_t r = r0 + l < rows ? r0 + l : rows - 1;
            for (std::size_t j = 0; j < L; ++j) lanes_base.get()[j * kLanes + l] = bases.get()[r * L + j];
        }
        std::memcpy(cur.get(), lanes_base.get(), L * kLanes * sizeof(u64));
        for (std::size_t d = 0; d < per_row; ++d) {
            const u64* src = d == 0 ? one_m.get() : cur.get();
            if (d >= 2) ifma::amm8(cur.get(), cur.get(), lanes_base.get(), N52, k0_, L_, work.get());
            for (int l = 0; l < kLanes && r0 + l < rows; ++l) {
                u64* entry = table + (((r0 + l) << window_) + d) * L;
                for (std::size_t j = 0; j < L; ++j) entry[j] = src[j * kLanes + l];
            }
        }
    }
}

FixedBaseTable::~FixedBaseTable() = default;

void FixedBaseTable::powers(const std::uint8_t* alphas, std::size_t count, std::uint8_t* out) const {
    run(Mode::kPower, nullptr, alphas, count, out);
}

void FixedBaseTable::encrypt(const std::uint8_t* plaintexts, const std::uint8_t* alphas, std::size_t count,
                             std::uint8_t* out) const {
    run(Mode::kEncrypt, plaintexts, alphas, count, out);
}

void FixedBaseTable::rerandomize(const std::uint8_t* ciphertexts, const std::uint8_t* alphas, std::size_t count,
                                 std::uint8_t* out) const {
    run(Mode::kRerandomize, ciphertexts, alphas, count, out);
}

void FixedBaseTable::run(Mode mode, const std::uint8_t* in, const std::uint8_t* alphas, std::size_t count,
                         std::uint8_t* out) const {
    const std::size_t L = static_cast<std::size_t>(L_);
    const std::size_t eb = exponent_bytes(), pb = plaintext_bytes(), cb = ciphertext_bytes();
    const std::size_t in_bytes = mode == Mode::kEncrypt ? pb : cb;
    const std::size_t in_limbs = mode == Mode::kEncrypt ? limbs_n_ : limbs_N_;
    const u64* bound = mode == Mode::kEncrypt ? n64_.get() : N64_.get();

    // Every input is checked before any work: alpha < 2^exponent_bits, m < n, c < N.
    const unsigned spare = static_cast<unsigned>(8 * eb - exponent_bits_);
    Scratch limbs(limbs_N_ + limbs_n_ + 1);
    for (std::size_t i = 0; i < count; ++i) {
        if (spare != 0 && (alphas[i * eb + eb - 1] >> (8 - spare)) != 0)
            throw std::invalid_argument("alpha must be below 2^exponent_bits (item " + std::to_string(i) + ")");
        if (mode != Mode::kPower) {
            limbs_from_le(in + i * in_bytes, in_bytes, limbs.get(), in_limbs);
            if (cmp_limbs(limbs.get(), bound, in_limbs) >= 0)
                throw std::invalid_argument(std::string(mode == Mode::kEncrypt ? "plaintext must be below n"
                                                                               : "ciphertext must be below n^2") +
                                            " (item " + std::to_string(i) + ")");
        }
    }

    const std::size_t rows = static_cast<std::size_t>(rows_);
    Scratch acc(L * kLanes), operand(L * kLanes), offsets(rows * kLanes), work(ifma::scratch_words(L_));
    Scratch product(limbs_N_ + 1);
    for (std::size_t g = 0; g < count; g += kLanes) {
        for (int l = 0; l < kLanes; ++l) {
            const std::size_t i = g + l;
            u64* dl = operand.get() + l;
            if (i >= count) {  // padding lane: hs^0 times 1, discarded
                for (std::size_t r = 0; r < rows; ++r) offsets.get()[r * kLanes + l] = (r << window_) * L;
                for (std::size_t j = 0; j < L; ++j) dl[j * kLanes] = j == 0;
                continue;
            }
            const std::uint8_t* alpha = alphas + i * eb;
            for (std::size_t r = 0; r < rows; ++r) {
                const u64 digit = bits_at(alpha, eb, r * window_, window_);
                offsets.get()[r * kLanes + l] = ((r << window_) + digit) * L;
            }
            switch (mode) {
                case Mode::kPower:
                    for (std::size_t j = 0; j < L; ++j) dl[j * kLanes] = j == 0;
                    break;
                case Mode::kEncrypt: {  // 1 + n m < N since m < n
                    limbs_from_le(in + i * pb, pb, limbs.get(), limbs_n_);
                    mul_limbs(n64_.get(), limbs_n_, limbs.get(), limbs_n_, product.get());
                    u64* p = product.get();
                    for (std::size_t w = 0; w < limbs_N_ && ++p[w] == 0; ++w) {
                    }
                    limbs_to_digits(p, limbs_N_, dl, L_, kLanes);
                    break;
                }
                case Mode::kRerandomize:
                    limbs_from_le(in + i * cb, cb, limbs.get(), limbs_N_);
                    limbs_to_digits(limbs.get(), limbs_N_, dl, L_, kLanes);
                    break;
            }
        }
        ifma::comb8(acc.get(), table_.get(), offsets.get(), rows_, N52_.get(), k0_, L_, work.get());
        // hs^alpha R times the plain operand, divided by R: the result in ordinary form, < 2N.
        ifma::amm8(acc.get(), acc.get(), operand.get(), N52_.get(), k0_, L_, work.get());
        for (int l = 0; l < kLanes && g + l < count; ++l) {
            reduce_lane(acc.get() + l, N52_.get(), L_);
            digits_to_limbs(acc.get() + l, L_, kLanes, limbs.get(), limbs_N_);
            limbs_to_le(limbs.get(), out + (g + l) * cb, cb);
        }
    }
}

}  // namespace vflsec::paillier
