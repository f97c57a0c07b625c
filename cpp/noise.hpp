// Cryptographically secure Gaussian noise: a counter-mode ChaCha20 generator
// and a constant-time Box-Muller transform.
//
// Stream layout. Output block b (64 bytes) is ChaCha20(key, stream id, b); it
// is read as 8 little-endian uint64 words. A request for n values reserves
// ceil(n / 8) fresh blocks under a mutex, then computes them in parallel:
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

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "chacha20.hpp"
#include "secure_zero.hpp"

namespace vflsec::noise {

// 32 bytes from the kernel's CSPRNG (getrandom(2), blocking until the pool is
// initialised; retries on EINTR and short reads). Throws std::system_error if
// no entropy can be had: a secure generator never falls back to a weak seed.
void os_entropy(uint8_t* out, size_t n);

struct Reservation {
    chacha20::Key key;
    uint64_t stream_id;
    uint64_t first_block;
};

class ChaCha20Generator {
public:
    // Secure: keyed from OS entropy, re-keyed from OS entropy in a forked child.
    ChaCha20Generator();
    // Deterministic: keyed with the given 32 bytes (the caller derives them
    // from a seed), starting at block `first_block`. Not re-keyed on fork:
    // parent and child continue the same stream.
    ChaCha20Generator(const uint8_t key[32], uint64_t first_block);
    ~ChaCha20Generator();
    ChaCha20Generator(const ChaCha20Generator&) = delete;
    ChaCha20Generator& operator=(const ChaCha20Generator&) = delete;

    bool is_secure() const { return secure_; }
    uint64_t blocks_used();
    // Claims `nblocks` consecutive unused blocks; throws std::overflow_error if
    // the 64-bit block counter would wrap (never reuse keystream).
    Reservation reserve(uint64_t nblocks);

    // The kernels below reserve their blocks, then compute with the GIL
    // released by the caller. They write exactly n values.
    void fill_normal_f64(double* out, size_t n, double sigma);
    void fill_normal_f32(float* out, size_t n, double sigma);
    // out = x + sigma * z (float32: computed in float64, rounded once).
    // Returns the number of non-finite results (overflow), 0 normally.
    size_t add_normal_f64(const double* x, double* out, size_t n, double sigma);
    size_t add_normal_f32(const float* x, float* out, size_t n, double sigma);
    void fill_raw(uint64_t* out, size_t n);

    // pthread_atfork handlers only (noise.cpp): hold the lock across fork.
    void lock_for_fork();
    void unlock_after_fork();

private:
    void rekey_from_os();
    std::mutex mutex_;
    chacha20::Key key_;
    uint64_t stream_id_ = 0;
    uint64_t next_block_ = 0;
    pid_t pid_ = 0;
    bool secure_;
};

// Exposed for tests: the polynomial log (on (0, 1]) and sin/cos (on
// [-pi/4, pi/4]) used by the transform (box_muller.hpp).
void log_unit_interval(const double* u, double* out, size_t n);
void sincos_quarter(const double* x, double* sin_out, double* cos_out, size_t n);
// The ISA path of these kernels and of the lattice release (one family of
// isa_dispatch.hpp, isa::noise_family()): "default" (SSE2, 4 blocks per
// vector), "avx2" (8) or "avx512f" (16; AVX-512 F with DQ and VL, which the
// release's vector path uses). select_isa("auto") returns to the CPU's best;
// both return the path in use. Throws std::invalid_argument for a path this
// CPU lacks.
const char* select_isa(const char* name);
const char* current_isa();

}  // namespace vflsec::noise
