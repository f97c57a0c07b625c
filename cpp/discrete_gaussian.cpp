// Exact discrete Gaussian sampler; see discrete_gaussian.hpp for the
// algorithm, the stream layout and the timing caveat.
#include "parallel.hpp"
#include "discrete_gaussian.hpp"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>

#include "chacha20.hpp"
#include "secure_zero.hpp"

namespace vflsec::noise {

namespace {

using chacha20::Key;
using u128 = unsigned __int128;

constexpr uint64_t kOverflowStreamBit = 1ull << 63;

inline int bit_length(uint64_t v) { return v == 0 ? 0 : 64 - __builtin_clzll(v); }

// The random bits of one chunk: its reserved main-stream blocks, then its
// overflow stream (see discrete_gaussian.hpp).
class ChunkBits {
public:
    ChunkBits(const Key& key, uint64_t main_stream, uint64_t first_block, uint64_t nblocks)
        : key_(key), main_stream_(main_stream), next_(first_block), end_(first_block + nblocks),
          overflow_stream_(kOverflowStreamBit | first_block) {}
    ~ChunkBits() {
        secure_zero(buf_, sizeof buf_);
        secure_zero(&bitbuf_, sizeof bitbuf_);
    }
    ChunkBits(const ChunkBits&) = delete;
    ChunkBits& operator=(const ChunkBits&) = delete;

    uint64_t word() {
        if (pos_ == avail_) refill();
        return buf_[pos_++];
    }

    // k in [1, 64] fresh uniform bits; leftover bits of a word are used first
    // (least significant first), then the next word.
    uint64_t bits(int k) {
        if (k <= nbits_) {
            const uint64_t r = k == 64 ? bitbuf_ : bitbuf_ & ((1ull << k) - 1);
            bitbuf_ = k == 64 ? 0 : bitbuf_ >> k;
            nbits_ -= k;
            return r;
        }
        const int have = nbits_;  // < k <= 64
        const int need = k - have;
        const uint64_t w = word();
        uint64_t r = bitbuf_;
        r |= (need == 64 ? w : (w & ((1ull << need) - 1))) << have;
        bitbuf_ = need == 64 ? 0 : w >> need;
        nbits_ = 64 - need;
        return r;
    }

private:
    void refill() {
        alignas(64) uint32_t w[16][4];
        uint64_t nblk;
        if (next_ < end_) {
            // The group may run past end_ (never past 2^63 + 3: no counter
            // wrap); blocks past end_ belong to another chunk and are dropped.
            chacha20::blocks_lanes<4>(key_, main_stream_, next_, w);
            nblk = std::min<uint64_t>(4, end_ - next_);
            next_ += nblk;
        } else {
            if (overflow_next_ > UINT64_MAX - 4)
                throw std::overflow_error("vflsec: discrete Gaussian overflow stream exhausted");
            chacha20::blocks_lanes<4>(key_, overflow_stream_, overflow_next_, w);
            overflow_next_ += 4;
            nblk = 4;
        }
        for (uint64_t j = 0; j < nblk; ++j)
            for (int k = 0; k < 8; ++k)
                buf_[8 * j + k] = static_cast<uint64_t>(w[2 * k][j]) | (static_cast<uint64_t>(w[2 * k + 1][j]) << 32);
        secure_zero(w, sizeof w);
        pos_ = 0;
        avail_ = static_cast<int>(8 * nblk);
    }

    const Key& key_;
    uint64_t main_stream_, next_, end_;
    uint64_t overflow_stream_, overflow_next_ = 0;
    uint64_t buf_[32];
    int pos_ = 0, avail_ = 0;
    uint64_t bitbuf_ = 0;
    int nbits_ = 0;
};

// Uniform integer on [0, n), n >= 1: bit_length(n - 1) bits, values >= n rejected.
inline uint64_t below64(ChunkBits& src, uint64_t n) {
    if (n <= 1) return 0;
    const int k = bit_length(n - 1);
    for (;;) {
        const uint64_t v = src.bits(k);
        if (v < n) return v;
    }
}

constexpr int kMaxLimbs = 17;  // 2 W + 1 for W = 8

// Bernoulli(m / n) for 0 <= m <= n, n >= 1 (nl limbs each, little-endian):
// true iff V < m for V uniform on [0, n). V is drawn from its top limb down
// (the top limb with only the bits n - 1 needs); the draw is rejected as soon
// as V > n - 1 is certain and stops as soon as V < n and the comparison with m
// are both decided. Equivalent to drawing V whole, since later limbs are
// independent of earlier ones.
bool bernoulli_ratio(ChunkBits& src, const uint64_t* m, const uint64_t* n, int nl) {
    uint64_t N[kMaxLimbs], M[kMaxLimbs];
    bool m_zero = true;
    for (int i = 0; i < nl; ++i) m_zero = m_zero && m[i] == 0;
    if (m_zero) return false;
    // N = n - 1, M = m - 1 (both >= 0).
    uint64_t bn = 1, bm = 1;
    for (int i = 0; i < nl; ++i) {
        N[i] = n[i] - bn;
        bn = (n[i] < bn) ? 1 : 0;
        M[i] = m[i] - bm;
        bm = (m[i] < bm) ? 1 : 0;
    }
    int top = nl - 1;
    while (top > 0 && N[top] == 0) --top;
    if (top == 0 && N[0] == 0) return true;  // n == 1: V = 0 < m
    const int top_bits = bit_length(N[top]);
    for (;;) {
        bool n_decided = false;  // V < N already certain
        int m_state = 0;         // -1: V < M, +1: V > M, 0: equal so far
        bool rejected = false;
        for (int i = top; i >= 0; --i) {
            const uint64_t v = i == top ? src.bits(top_bits) : src.word();
            if (!n_decided) {
                if (v > N[i]) {
                    rejected = true;
                    break;
                }
                n_decided = v < N[i];
            }
            if (m_state == 0) m_state = v < M[i] ? -1 : (v > M[i] ? 1 : 0);
            if (n_decided && m_state != 0) return m_state < 0;
        }
        if (!rejected) return m_state <= 0;  // V <= N; V < m iff V <= M
    }
}

// Bernoulli(exp(-1)) (Algorithm 1 with gamma = 1): the first k >= 1 with
// Bernoulli(1 / k) = 0 is odd with probability exp(-1). k = 1 always succeeds.
inline bool bernoulli_exp_neg1(ChunkBits& src) {
    uint64_t k = 2;
    while (below64(src, k) == 0) ++k;
    return (k & 1) == 1;
}

// Bernoulli(exp(-num / den)) for 0 <= num <= den < 2^64 (Algorithm 1).
inline bool bernoulli_exp_neg_unit64(ChunkBits& src, uint64_t num, uint64_t den) {
    uint64_t k = 1;
    for (;; ++k) {
        const u128 q = static_cast<u128>(den) * k;
        bool success;
        if ((q >> 64) == 0) {
            success = below64(src, static_cast<uint64_t>(q)) < num;
        } else {
            const uint64_t ql[2] = {static_cast<uint64_t>(q), static_cast<uint64_t>(q >> 64)};
            const uint64_t ml[2] = {num, 0};
            success = bernoulli_ratio(src, ml, ql, 2);
        }
        if (!success) break;
        if (k == UINT64_MAX) throw std::overflow_error("vflsec: Bernoulli(exp(-gamma)) counter overflow");
    }
    return (k & 1) == 1;
}

template <int W>
struct Sampler {
    static constexpr int L = 2 * W + 1;
    uint64_t a[L] = {}, bt[L] = {}, den[L] = {};
    uint64_t t;

    Sampler(const DiscreteGaussianParams& p) : t(p.t) {
        for (int i = 0; i < W; ++i) {
            a[i] = p.a[i];
            bt[i] = p.bt[i];
            den[i] = p.den[i];
        }
    }

    static int cmp(const uint64_t* x, const uint64_t* y) {
        for (int i = L - 1; i >= 0; --i)
            if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
        return 0;
    }
    // out (zeroed, >= xn + yn limbs) = x * y, schoolbook on 64-bit limbs.
    static void mul(uint64_t* out, const uint64_t* x, int xn, const uint64_t* y, int yn) {
        for (int i = 0; i < xn; ++i) {
            uint64_t carry = 0;
            for (int j = 0; j < yn; ++j) {
                const u128 c = static_cast<u128>(x[i]) * y[j] + out[i + j] + carry;
                out[i + j] = static_cast<uint64_t>(c);
                carry = static_cast<uint64_t>(c >> 64);
            }
            out[i + yn] = carry;
        }
    }

    static void sub(uint64_t* x, const uint64_t* y) {  // x -= y, x >= y
        uint64_t borrow = 0;
        for (int i = 0; i < L; ++i) {
            const u128 d = static_cast<u128>(x[i]) - y[i] - borrow;
            x[i] = static_cast<uint64_t>(d);
            borrow = static_cast<uint64_t>(d >> 64) & 1;
        }
    }

    // Bernoulli(exp(-(|y| bt - a)^2 / den)) (Algorithms 1 and 3).
    bool accept(ChunkBits& src, u128 y) const {
        // p = y * bt (W + 2 <= L limbs)
        uint64_t p[L] = {};
        const uint64_t yl[2] = {static_cast<uint64_t>(y), static_cast<uint64_t>(y >> 64)};
        mul(p, yl, 2, bt, W);
        uint64_t d[L];
        if (cmp(p, a) >= 0) {
            std::memcpy(d, p, sizeof d);
            sub(d, a);
        } else {
            std::memcpy(d, a, sizeof d);
            sub(d, p);
        }
        bool huge = false;
        for (int i = W; i < L; ++i) huge = huge || d[i] != 0;
        if (huge) {
            // d >= 2^(64 W) > den, so gamma > 2^(64 W) >= 2^128: each unit of
            // gamma needs one Bernoulli(exp(-1)) success, and the first
            // failure (within a few draws, but exactly) rejects.
            for (uint64_t i = 0; i < UINT64_MAX; ++i)
                if (!bernoulli_exp_neg1(src)) return false;
            throw std::overflow_error("vflsec: discrete Gaussian rejection counter overflow");
        }
        // num = d^2 (2 W limbs)
        uint64_t num[L] = {};
        mul(num, d, W, d, W);
        while (cmp(num, den) > 0) {
            if (!bernoulli_exp_neg1(src)) return false;
            sub(num, den);
        }
        // gamma = num / den in [0, 1]: first k with Bernoulli(num / (den k)) = 0.
        uint64_t q[L];
        uint64_t k = 1;
        for (;; ++k) {
            uint64_t carry = 0;
            for (int i = 0; i <= W; ++i) {
                const u128 c = static_cast<u128>(den[i]) * k + carry;
                q[i] = static_cast<uint64_t>(c);
                carry = static_cast<uint64_t>(c >> 64);
            }
            if (!bernoulli_ratio(src, num, q, W + 1)) break;
            if (k == UINT64_MAX) throw std::overflow_error("vflsec: Bernoulli(exp(-gamma)) counter overflow");
        }
        return (k & 1) == 1;
    }

    int64_t sample(ChunkBits& src) const {
        for (;;) {
            // Discrete Laplace with P[y] ~ exp(-|y| / t) (Algorithm 2, s = 1).
            u128 y;
            bool negative;
            for (;;) {
                const uint64_t u = below64(src, t);
                if (!bernoulli_exp_neg_unit64(src, u, t)) continue;
                uint64_t v = 0;
                while (bernoulli_exp_neg1(src)) ++v;
                y = static_cast<u128>(t) * v + u;
                negative = src.bits(1) == 1;
                if (negative && y == 0) continue;  // 0 would be counted twice
                break;
            }
            if (accept(src, y)) {
                if (y > static_cast<u128>(INT64_MAX))
                    throw std::overflow_error("vflsec: discrete Gaussian sample does not fit in int64");
                const int64_t s = static_cast<int64_t>(y);
                return negative ? -s : s;
            }
        }
    }
};

// Below this many chunks per thread, starting threads costs more than it saves.
constexpr uint64_t kMinChunksPerThread = 8;

template <int W>
void run(const Reservation& r, int64_t* out, size_t n, const DiscreteGaussianParams& p, size_t per_chunk,
         uint64_t blocks_per_chunk, uint64_t nchunks) {
    const Sampler<W> sampler(p);
    auto do_chunk = [&](uint64_t c) {
        ChunkBits src(r.key, r.stream_id, r.first_block + c * blocks_per_chunk, blocks_per_chunk);
        const size_t lo = static_cast<size_t>(c) * per_chunk;
        const size_t hi = std::min(n, lo + per_chunk);
        for (size_t i = lo; i < hi; ++i) out[i] = sampler.sample(src);
    };
    uint64_t threads = static_cast<uint64_t>(std::max(1, vflsec::num_threads()));
    threads = std::min(threads, std::max<uint64_t>(1, nchunks / kMinChunksPerThread));
    if (threads <= 1) {
        for (uint64_t c = 0; c < nchunks; ++c) do_chunk(c);
        return;
    }
    std::exception_ptr error;
    std::mutex error_mutex;
    const int64_t nc = static_cast<int64_t>(nchunks);
#pragma omp parallel for num_threads(static_cast<int>(threads)) schedule(dynamic, 4)
    for (int64_t c = 0; c < nc; ++c) {
        try {
            do_chunk(static_cast<uint64_t>(c));
        } catch (...) {
            std::lock_guard<std::mutex> lock(error_mutex);
            if (!error) error = std::current_exception();
        }
    }
    if (error) std::rethrow_exception(error);
}

}  // namespace

void fill_discrete_gaussian(ChaCha20Generator& gen, int64_t* out, size_t n, const DiscreteGaussianParams& p,
                            size_t samples_per_chunk, uint64_t blocks_per_chunk) {
    if (p.limbs != 2 && p.limbs != 4 && p.limbs != 8)
        throw std::invalid_argument("discrete Gaussian parameters must have 2, 4 or 8 limbs");
    if (p.t == 0) throw std::invalid_argument("discrete Gaussian scale t must be >= 1");
    bool den_zero = true;
    for (size_t i = 0; i < p.limbs; ++i) den_zero = den_zero && p.den[i] == 0;
    if (den_zero) throw std::invalid_argument("discrete Gaussian denominator must be >= 1");
    if (samples_per_chunk == 0 || blocks_per_chunk == 0)
        throw std::invalid_argument("samples_per_chunk and blocks_per_chunk must be >= 1");
    if (n == 0) return;
    const uint64_t nchunks = n / samples_per_chunk + (n % samples_per_chunk != 0);
    if (nchunks > (kOverflowStreamBit - 1) / blocks_per_chunk)
        throw std::overflow_error("vflsec: discrete Gaussian request too large");
    const uint64_t nblocks = nchunks * blocks_per_chunk;
    Reservation r = gen.reserve(nblocks);
    if (r.stream_id >= kOverflowStreamBit || r.first_block > kOverflowStreamBit - nblocks) {
        secure_zero(&r, sizeof r);
        throw std::overflow_error(
            "vflsec: ChaCha20 block counter past 2^63, reserved for discrete Gaussian overflow streams; "
            "create a new generator");
    }
    try {
        switch (p.limbs) {
            case 2: run<2>(r, out, n, p, samples_per_chunk, blocks_per_chunk, nchunks); break;
            case 4: run<4>(r, out, n, p, samples_per_chunk, blocks_per_chunk, nchunks); break;
            default: run<8>(r, out, n, p, samples_per_chunk, blocks_per_chunk, nchunks); break;
        }
    } catch (...) {
        secure_zero(&r, sizeof r);
        throw;
    }
    secure_zero(&r, sizeof r);
}

}  // namespace vflsec::noise
