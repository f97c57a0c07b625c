// Cryptographically secure Gaussian noise: counter-mode ChaCha20 keystream
// from a ChaCha20Generator (chacha20_generator.hpp) through a constant-time
// Box-Muller transform.
//
// Stream layout. Output block b (64 bytes) is ChaCha20(key, stream id, b); it
// is read as 8 little-endian uint64 words. A request for n values reserves
// ceil(n / 8) fresh blocks from the generator, then computes them in parallel:
// value i always comes from block first + i / 8, whatever the thread count or
// SIMD width, so a seeded stream is reproducible bit for bit across thread
// counts and CPUs (noise.cpp is compiled with -ffp-contract=off so that no ISA
// path fuses a multiply-add differently).
//
// Normals. Pair k of a request uses words 2k (u1) and 2k+1 (u2):
//   u1 = ((w1 >> 11) + 1) / 2^53               in (0, 1]
//   theta = 2 pi (w2 >> 11) / 2^53 - pi / 4    uniform over one period
//   z_2k = sqrt(-2 ln u1) cos(theta),  z_2k+1 = sqrt(-2 ln u1) sin(theta).
// log, sin and cos are evaluated by fixed polynomials (no table, no branch, no
// rejection), so every sample costs the same work whatever its value.
#pragma once

#include <cstddef>
#include <cstdint>

#include "chacha20_generator.hpp"

namespace vflsec::noise {

// The kernels below reserve their blocks from `gen`, then compute with the
// GIL released by the caller. They write exactly n values. Their ISA path is
// isa::noise_family()'s (shared with the lattice release): "default" (SSE2,
// 4 blocks per vector), "avx2" (8) or "avx512f" (16; AVX-512 F with DQ and
// VL, which the release's vector path uses).
void fill_normal_f64(ChaCha20Generator& gen, double* out, size_t n, double sigma);
void fill_normal_f32(ChaCha20Generator& gen, float* out, size_t n, double sigma);
// out = x + sigma * z (float32: computed in float64, rounded once).
// Returns the number of non-finite results (overflow), 0 normally.
size_t add_normal_f64(ChaCha20Generator& gen, const double* x, double* out, size_t n, double sigma);
size_t add_normal_f32(ChaCha20Generator& gen, const float* x, float* out, size_t n, double sigma);
void fill_raw(ChaCha20Generator& gen, uint64_t* out, size_t n);

// Exposed for tests: the polynomial log (on (0, 1]) and sin/cos (on
// [-pi/4, pi/4]) used by the transform (box_muller.hpp).
void log_unit_interval(const double* u, double* out, size_t n);
void sincos_quarter(const double* x, double* sin_out, double* cos_out, size_t n);

}  // namespace vflsec::noise
