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

#include "paillier_ifma.hpp"
#include "secure_zero.hpp"

namespace vflsec::paillier {
namespace {

using u64 = std::uint64_t;
using u128 = unsigned __int128;
constexpr u64 kMask52 = (u64{1} << 52) - 1;
constexpr int kLanes = 8;

u64* alloc_words(std::size_t words) {
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

void limbs_from_le(const std::uint8_t* p, std::size_t len, u64* out, std::size_t limbs) {
    for (std::size_t i = 0; i < limbs; ++i) out[i] = 0;
    for (std::size_t b = 0; b < len; ++b) out[b / 8] |= static_cast<u64>(p[b]) << (8 * (b % 8));
}

void limbs_to_le(const u64* x, std::uint8_t* out, std::size_t len) {
    for (std::size_t b = 0; b < len; ++b) out[b] = static_cast<std::uint8_t>(x[b / 8] >> (8 * (b % 8)));
}

int bit_length(const u64* x, std::size_t limbs) {
    for (std::size_t i = limbs; i-- > 0;)
        if (x[i] != 0) return static_cast<int>(64 * i) + 64 - __builtin_clzll(x[i]);
    return 0;
}

int cmp_limbs(const u64* a, const u64* b, std::size_t limbs) {
    for (std::size_t i = limbs; i-- > 0;)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return 0;
}

void sub_limbs(u64* a, const u64* b, std::size_t limbs) {  // a -= b (mod 2^(64 limbs))
    u64 borrow = 0;
    for (std::size_t i = 0; i < limbs; ++i) {
        const u64 t = a[i] - b[i];
        const u64 b1 = a[i] < b[i];
        a[i] = t - borrow;
        borrow = b1 | (t < borrow);
    }
}

// out[0, an + bn) = a b (schoolbook; once per key and once per encrypted value).
void mul_limbs(const u64* a, std::size_t an, const u64* b, std::size_t bn, u64* out) {
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
void limbs_to_digits(const u64* x, std::size_t limbs, u64* d, int L, std::size_t stride) {
    for (int j = 0; j < L; ++j) {
        const std::size_t bit = 52 * static_cast<std::size_t>(j);
        const std::size_t w = bit / 64;
        const unsigned s = bit % 64;
        u64 v = w < limbs ? x[w] >> s : 0;
        if (s > 12 && w + 1 < limbs) v |= x[w + 1] << (64 - s);
        d[j * stride] = v & kMask52;
    }
}

void digits_to_limbs(const u64* d, int L, std::size_t stride, u64* x, std::size_t limbs) {
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
void reduce_lane(u64* d, const u64* N52, int L) {
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

void broadcast(const u64* single, int L, u64* lanes) {
    for (int j = 0; j < L; ++j)
        for (int l = 0; l < kLanes; ++l) lanes[j * kLanes + l] = single[j];
}

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
    L_ = (bit_length(N64_.get(), limbs_N_) + 2 + 51) / 52;  // 4N < R = 2^(52 L)
    N52_.reset(alloc_words(static_cast<std::size_t>(L_)));
    limbs_to_digits(N64_.get(), limbs_N_, N52_.get(), L_, 1);
    u64 inv = N64_[0];  // N^-1 mod 2^64 by Newton's iteration (each step doubles the correct bits)
    for (int i = 0; i < 6; ++i) inv *= 2 - N64_[0] * inv;
    k0_ = (0 - inv) & kMask52;

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
        // R^2 mod N by doubling 1, 2 * 52 L times (x < N, so 2x < 2N: one subtraction at most).
        u64* x = limbs.get();
        for (std::size_t i = 0; i < limbs_N_; ++i) x[i] = 0;
        x[0] = 1;
        for (std::size_t i = 0; i < 2 * 52 * L; ++i) {
            const u64 top = x[limbs_N_ - 1] >> 63;
            for (std::size_t w = limbs_N_; w-- > 1;) x[w] = (x[w] << 1) | (x[w - 1] >> 63);
            x[0] <<= 1;
            if (top || cmp_limbs(x, N64_.get(), limbs_N_) >= 0) sub_limbs(x, N64_.get(), limbs_N_);
        }
        limbs_to_digits(x, limbs_N_, single.get(), L_, 1);
        broadcast(single.get(), L_, rr.get());
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
