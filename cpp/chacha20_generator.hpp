// The counter-mode ChaCha20 generator behind a vflsec.NoiseGenerator: a key,
// a stream id and the next unused 64-byte block, handed out in reservations.
// It computes no keystream itself: each kernel (the CPU noise kernels of
// noise.cpp, the lattice and discrete Gaussian samplers, the CUDA kernels)
// reserves the blocks it needs, then computes them from the reservation
// (chacha20.hpp, chacha20_block.hpp), so a block is never used twice whatever
// the kernel, thread or device.
//
// Built once (CMake target vflsec_chacha20_generator) and linked into both
// extension modules: vflsec._core registers the Python type, and
// vflsec._core_cuda takes the very same objects (pybind11 shares registered
// types across modules), so CPU and GPU draws of one generator come from one
// counter.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "chacha20.hpp"

namespace vflsec::noise {

// 32 bytes from the kernel's CSPRNG (getrandom(2), blocking until the pool is
// initialised; retries on EINTR and short reads). Throws std::system_error if
// no entropy can be had: a secure generator never falls back to a weak seed.
void os_entropy(uint8_t* out, size_t n);

// Blocks first_block, first_block + 1, ... of ChaCha20 stream `stream_id`
// under `key`: the caller's alone. Wipe it (secure_zero) after use.
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
    // Claims `nblocks` consecutive unused blocks (thread-safe); throws
    // std::overflow_error if the 64-bit block counter would wrap (never reuse
    // keystream).
    Reservation reserve(uint64_t nblocks);

    // pthread_atfork handlers only (chacha20_generator.cpp): hold the lock
    // across fork.
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

}  // namespace vflsec::noise
