// The secure Gaussian release: x -> g K, K ~ round(x / g + s N(0, 1)), on the
// lattice g Z.
//
// Why. x + N(0, sigma^2) computed in floating point leaks x through the grid
// its results lie on (Mironov, CCS 2012; Jin et al., IEEE S&P 2022). Here the
// output is g times an integer K drawn in integer arithmetic and converted to
// floating point once: its representation carries nothing about x beyond K.
//
// Lattice. The caller passes e with g = 2^e and s = sigma / g in [2^20, 2^21)
// (python/vflsec/kernels/noise.py: e = floor(log2 sigma) - 20, sigma on a
// grid of 256 steps per octave), so the lattice spacing is at most sigma 2^-20.
//
// Noise. K = rint(x / g) + Z where, with the centre c = x / g - rint(x / g) in
// [-1/2, 1/2] (exact), Z has the distribution of round(c + s N): P(Z = z) =
// Phi((z - c + 1/2) / s) - Phi((z - c - 1/2) / s). So K has exactly the law of
// round(x / g + s N): post-processing of the continuous Gaussian mechanism
// x + N(0, sigma^2) on x itself (x is not rounded), and every guarantee of
// the continuous mechanism (analytic calibration, RDP, PLD) holds with the
// query's own sensitivity.
//
// Sampler (rejection from a piecewise-uniform envelope, exact up to the
// evaluation error of one exp in long double). The integers in [-T0, T0),
// T0 = ceil(13 s / W) W with W = 2^11, are cut into core blocks of W, and the
// tails out to |z| < T (T >= 130 s) into blocks of 2^18; block b gets
// the integer weight m_b >= C R(z0_b) (R the rounded-Gaussian density, z0_b
// the block's envelope point: the smallest |z - c| over the block and every
// centre c, where R(z - c) peaks), one extra
// "reject" item holds the rest of 2^127. A 15-bit index and an alias table
// with 112-bit thresholds pick an item with probability exactly m / 2^127;
// an 11-bit offset picks z in the block; z is accepted with probability
// a(z) = C R(z - c) / m_b <= 1, else the whole trial starts again. The
// accepted z has probability proportional to C R(z - c) exactly when a(z) is
// exact (the envelope does not depend on c, and sum_z R(z - c) = 1 for every
// c, so the acceptance rate, hence the number of trials, does not depend on
// x); a(z) is
// evaluated in 80-bit long double with a relative error below 2^-60, which
// bounds |ln Q(z) / P(z)| by 2^-58 for |z| < T; P(|Z| >= T) < 10^-3000. Why
// 130 s: neighbouring inputs shift the centre by r = Delta / sigma, and an
// output the neighbour's truncated noise cannot produce is a privacy failure
// of probability P(Z >= T - r s), negligible for r <= 100 (epsilon up to
// several thousand; vflsec.dp.lattice accounts for it).
//
// One 64-bit word per trial: bits 0-14 item, 15-34 alias coin (20 bits),
// 35-45 offset, 50-63 acceptance coin (14 bits). The fast path decides with
// these bits alone (a table entry holds the alias threshold's top 20 bits and
// a 14-bit lower bound on a(z) in each candidate block); when the coarse bits
// cannot decide (an alias tie, probability 2^-20; the acceptance coin above
// the block's lower bound, about 0.1-0.4%) the trial finishes on the slow
// path: it evaluates a(z) and draws 64 further bits of the acceptance coin
// from a per-block overflow stream only when a(z) 2^14 falls in the coin's
// own interval [u14, u14 + 1) (the 14 bits decide otherwise); a rejected
// trial takes its next word from that stream. Tail blocks (about 2^-116 of
// the proposals) always take the slow path and draw their 18-bit offset there.
//
// Kernels. With AVX-512 (F, DQ, VL) the fast path runs 8 values (one main
// block) per 512-bit vector; any block with a slow-path value finishes those
// values in scalar code. Other CPUs run the same steps in scalar code. The
// paths give bit-identical results (tested).
//
// Stream layout. A request for n values reserves ceil(n / 8) blocks of the
// generator's main stream; value i takes word i % 8 of block first + i / 8.
// The slow path of the values of main block B reads, in value order, the
// overflow stream ChaCha20(key, stream id 2^63 | B, counter 0, 1, ...). No
// block is reserved twice, so no two values share randomness, and results
// are bit-identical for any thread count.
//
// Timing. Each trial is independent, the first accepted one is returned, and
// both the acceptance rate and the fast path's bound are the same for every
// centre: the number of trials and of slow-path entries have a distribution
// that does not depend on x. What does depend on the noise drawn is the
// table address (the block): a cache-timing channel for an attacker sharing
// the core, who together with the output would locate x to within a block
// (2^11 lattice steps, about sigma / 1000). Out of scope here, as for every
// table-based sampler; say so to users who share cores with adversaries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "chacha20_generator.hpp"

namespace vflsec::noise {

class LatticeGaussianTable {
public:
    // s in [2^20, 2^21); throws std::invalid_argument otherwise.
    explicit LatticeGaussianTable(double s);

    double scale() const { return s_; }
    int64_t support() const { return support_; }
    // The integer noise for one trial word, finishing on `slow` when needed.
    // (Public for the kernels; the layout is private to lattice_gaussian.cpp.)
    static constexpr int kItemBits = 15;
    static constexpr int kItems = 1 << kItemBits;
    static constexpr int kOffsetBits = 11;
    static constexpr int64_t kWidth = int64_t{1} << kOffsetBits;
    static constexpr int kTailOffsetBits = 18;
    static constexpr int64_t kTailWidth = int64_t{1} << kTailOffsetBits;
    static constexpr double kSupportSigmas = 130.0;

    double s_;
    long double inv_two_s2_;  // 1 / (2 s^2)
    long double inv_s2_;      // 1 / s^2
    int64_t half_blocks_;     // core blocks cover [-half_blocks W, half_blocks W)
    int64_t tail_blocks_;     // tail blocks per side, kTailWidth wide
    int64_t support_;         // |Z| < support_ (>= 130 s)
    // Per item: bits 0-19 the alias threshold's top 20 bits, 20-34 the alias
    // item, 35-48 / 49-62 14-bit lower bounds on a(z) in the item's / the
    // alias's block (0 for the reject item and padding).
    std::vector<uint64_t> entry_;
    std::vector<unsigned __int128> threshold_;  // full thresholds, in units of 2^-112
    std::vector<long double> kappa_;            // C R(z0) / m per item (0: reject)
};

// out[i] = g K_i, K_i ~ round(x[i] / g + s N), g = 2^e. Returns how many x[i] were out of
// range (|x / g| >= 2^62; their out[i] is NaN) or gave a non-finite result.
size_t add_lattice_gaussian_f64(ChaCha20Generator& gen, const LatticeGaussianTable& table, const double* x,
                                double* out, size_t n, int e);
size_t add_lattice_gaussian_f32(ChaCha20Generator& gen, const LatticeGaussianTable& table, const float* x,
                                float* out, size_t n, int e);
// The integer noise Z alone, centre 0 (tests, the kernels benchmark).
void fill_lattice_gaussian(ChaCha20Generator& gen, const LatticeGaussianTable& table, int64_t* out, size_t n);

}  // namespace vflsec::noise
