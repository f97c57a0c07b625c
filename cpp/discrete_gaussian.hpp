// Exact discrete Gaussian N_Z(0, sigma^2) from the ChaCha20 generator:
// Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy"
// (NeurIPS 2020), Algorithms 1-3, in exact integer arithmetic (no floating
// point anywhere). Python (python/vflsec/kernels/_discrete_gaussian.py)
// computes the rational parameters with sigma^2 = a / b exactly:
//   t   = floor(sigma) + 1              (discrete Laplace scale, < 2^64)
//   bt  = b t
//   den = 2 a b t^2
// and passes a, bt and den as little-endian 64-bit limbs (2, 4 or 8 limbs:
// 128, 256 or 512 bits; larger parameters stay on the Python sampler).
// One sample: y ~ discrete Laplace(t) (Algorithm 2 with s = 1: u uniform on
// [0, t), accept with Bernoulli(exp(-u/t)), v ~ geometric by Bernoulli(exp(-1))
// trials, y = +-(u + t v), -0 rejected); accept y with Bernoulli(exp(-gamma)),
// gamma = (|y| bt - a)^2 / den (Algorithm 3), else start again.
// Bernoulli(exp(-gamma)) follows Algorithm 1: subtract 1 from gamma per
// Bernoulli(exp(-1)) success, then for gamma = num/den in [0, 1] find the
// first k with Bernoulli(num / (den k)) = 0 and accept iff k is odd.
// Every Bernoulli(p / q) compares a uniform integer on [0, q) (exact rejection
// sampling, no modulo bias) with p; the uniform integer is drawn limb by limb
// from the top and the comparison stops as soon as it is decided, which is
// exact because the undrawn limbs are independent of the drawn ones.
//
// Stream layout. Rejection sampling consumes a data-dependent number of random
// bits, so each chunk of K consecutive output samples (K = samples_per_chunk)
// draws from its own deterministic sub-stream:
//   * A request for n samples reserves ceil(n / K) * R consecutive blocks of
//     the generator's main stream (R = blocks_per_chunk, a multiple of 4)
//     under the generator's mutex, like every other kernel. Chunk c owns the
//     blocks first + c R .. first + (c + 1) R - 1 and reads their words in
//     order (block by block, word w of a block = the little-endian uint64 at
//     byte 8 w); bits are taken from each word least-significant first.
//   * If chunk c exhausts its R blocks it continues on the overflow stream
//     ChaCha20(key, stream id 2^63 | (first + c R), block counter 0, 1, ...).
//     The stream id names the chunk's first reserved main-stream block, which
//     no other request ever owns, so no two chunks (of any request, of any
//     thread) share an overflow stream, and overflow streams never meet the
//     main stream (stream id < 2^63; this kernel refuses a reservation that
//     would reach block 2^63). Stream ids with the top bit set are reserved
//     for this purpose.
// Chunks are independent, so the samples are bit-identical for any thread
// count and scheduling, and a secure (OS-keyed) generator never reuses
// keystream. Unused reserved words are discarded. The reserved range is
// generated lazily, 4 blocks at a time, so a generous R costs counter space,
// not time.
//
// Timing. Rejection sampling takes a data-dependent number of steps, so the
// running time depends on the samples drawn: this is the timing side channel
// of exact discrete Gaussian samplers described by Jin et al. ("Are We There
// Yet? Timing and Floating-Point Attacks on Differential Privacy Systems",
// IEEE S&P 2022). The samples themselves are exact; this kernel does not hide
// its running time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "chacha20_generator.hpp"

namespace vflsec::noise {

struct DiscreteGaussianParams {
    // Little-endian 64-bit limbs, `limbs` of each (2, 4 or 8).
    const uint64_t* a;
    const uint64_t* bt;
    const uint64_t* den;
    size_t limbs;
    uint64_t t;  // >= 1
};

constexpr size_t kDgSamplesPerChunk = 64;
constexpr uint64_t kDgBlocksPerChunk = 64;

// Writes n exact N_Z(0, a/b) samples. Throws std::invalid_argument for
// malformed parameters, std::overflow_error if the block counter would pass
// 2^63 or (with negligible probability, only for huge sigma) an accepted
// sample does not fit in int64.
void fill_discrete_gaussian(ChaCha20Generator& gen, int64_t* out, size_t n, const DiscreteGaussianParams& p,
                            size_t samples_per_chunk = kDgSamplesPerChunk,
                            uint64_t blocks_per_chunk = kDgBlocksPerChunk);

}  // namespace vflsec::noise
