// Thread-count control shared by every kernel. OpenMP reads OMP_NUM_THREADS at
// start-up; set_num_threads overrides it for the rest of the process.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "forked_child.hpp"

namespace vflsec {

// Threads a kernel may use: OMP_NUM_THREADS / set_num_threads, 1 in a forked child.
inline int num_threads() {
    return forked_child_flag().load(std::memory_order_relaxed) ? 1 : omp_get_max_threads();
}

// Below this many ChaCha20 blocks per thread, starting threads costs more than it saves.
constexpr uint64_t kMinBlocksPerThread = 256;

// sum of fn(b0, b1) over a split of the blocks [0, nblocks) of one noise
// request among OpenMP threads. Split points fall on multiples of 16 blocks,
// which keeps every thread's SIMD groups whole; a kernel's output must not
// depend on the split (each value's randomness is fixed by its block).
template <typename Fn>
size_t sum_over_block_ranges(uint64_t nblocks, Fn&& fn) {
    if (nblocks == 0) return 0;
    uint64_t threads = static_cast<uint64_t>(std::max(1, num_threads()));
    threads = std::min(threads, std::max<uint64_t>(1, nblocks / kMinBlocksPerThread));
    if (threads <= 1) return fn(uint64_t{0}, nblocks);
    size_t total = 0;
#pragma omp parallel num_threads(static_cast<int>(threads)) reduction(+ : total)
    {
        const uint64_t t = static_cast<uint64_t>(omp_get_thread_num());
        const uint64_t nt = static_cast<uint64_t>(omp_get_num_threads());
        auto split = [&](uint64_t i) -> uint64_t {
            if (i >= nt) return nblocks;
            const uint64_t s = static_cast<uint64_t>((static_cast<unsigned __int128>(nblocks) * i) / nt);
            return s & ~uint64_t{15};
        };
        const uint64_t b0 = split(t), b1 = split(t + 1);
        if (b1 > b0) total += fn(b0, b1);
    }
    return total;
}

}  // namespace vflsec
