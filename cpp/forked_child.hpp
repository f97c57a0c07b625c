// Whether this process is a forked child of the one that loaded the module.
// Set by the generator's pthread_atfork child handler (chacha20_generator.cpp),
// read by the kernels' thread-count control (parallel.hpp). Kept apart from
// parallel.hpp so that the generator compiles without OpenMP.
#pragma once

#include <atomic>

namespace vflsec {

// libgomp's thread pool does not survive fork, and a child that starts a
// parallel region after the parent had threads waits for them forever:
// children run every kernel on one thread (a team of one never touches the
// pool). One flag per extension module (hidden visibility); the module's own
// copy of the generator code sets it.
inline std::atomic<bool>& forked_child_flag() {
    static std::atomic<bool> flag{false};
    return flag;
}

}  // namespace vflsec
