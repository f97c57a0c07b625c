// The ChaCha20 generator: keys, reservations and fork safety
// (chacha20_generator.hpp). No floating point and no OpenMP here: this file
// is compiled once, into the static library both extension modules link.
#include "chacha20_generator.hpp"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/random.h>
#include <unistd.h>

#include <set>
#include <stdexcept>
#include <system_error>

#include "forked_child.hpp"
#include "secure_zero.hpp"

namespace vflsec::noise {

namespace {

void read_dev_urandom(uint8_t* out, size_t n) {
    int fd;
    do {
        fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (fd < 0) throw std::system_error(errno, std::generic_category(), "vflsec: cannot open /dev/urandom");
    size_t got = 0;
    while (got < n) {
        const ssize_t r = ::read(fd, out + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            const int err = r < 0 ? errno : EIO;
            ::close(fd);
            throw std::system_error(err, std::generic_category(), "vflsec: reading /dev/urandom failed");
        }
        got += static_cast<size_t>(r);
    }
    ::close(fd);
}

}  // namespace

void os_entropy(uint8_t* out, size_t n) {
    size_t got = 0;
    while (got < n) {
        const ssize_t r = ::getrandom(out + got, n - got, 0);
        if (r > 0) {
            got += static_cast<size_t>(r);
        } else if (r < 0 && errno == EINTR) {
            continue;
        } else if (r < 0 && errno == ENOSYS) {
            // Kernels before 3.17 lack getrandom; /dev/urandom is the same CSPRNG.
            read_dev_urandom(out + got, n - got);
            return;
        } else {
            throw std::system_error(r < 0 ? errno : EIO, std::generic_category(),
                                    "vflsec: getrandom() failed; no OS entropy for a secure generator");
        }
    }
}

// Fork safety. A fork copies only the forking thread; a generator mutex that
// another thread held at that moment would stay locked in the child forever.
// Every live generator is registered; pthread_atfork's prepare handler takes
// the registry lock and every generator's lock (so no reservation is half
// done), and both parent and child release them (in the child the forking
// thread owns them). The child also marks itself so kernels run on one thread
// (parallel.hpp). Lock order: registry, then generators; reserve() takes only
// its own generator's lock.
//
// Each extension module holds its own copy of this code, so each registers
// its own handlers and registry. Generators are constructed only by
// vflsec._core (the Python type lives there), so _core's registry holds them
// all; _core_cuda's stays empty and its handlers only set its own flag.
namespace {

std::mutex& registry_mutex() {
    static std::mutex m;
    return m;
}

std::set<ChaCha20Generator*>& registry() {
    static std::set<ChaCha20Generator*> generators;
    return generators;
}

void before_fork() {
    registry_mutex().lock();
    for (ChaCha20Generator* g : registry()) g->lock_for_fork();
}

void after_fork_in_parent() {
    for (ChaCha20Generator* g : registry()) g->unlock_after_fork();
    registry_mutex().unlock();
}

void after_fork_in_child() {
    forked_child_flag().store(true, std::memory_order_relaxed);
    for (ChaCha20Generator* g : registry()) g->unlock_after_fork();
    registry_mutex().unlock();
}

const int kAtforkRegistered = ::pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);

void register_generator(ChaCha20Generator* g) {
    (void)kAtforkRegistered;
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry().insert(g);
}

void unregister_generator(ChaCha20Generator* g) {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry().erase(g);
}

}  // namespace

ChaCha20Generator::ChaCha20Generator() : secure_(true) {
    rekey_from_os();
    register_generator(this);
}

ChaCha20Generator::ChaCha20Generator(const uint8_t key[32], uint64_t first_block) : secure_(false) {
    key_ = chacha20::key_from_bytes(key);
    next_block_ = first_block;
    pid_ = ::getpid();
    register_generator(this);
}

ChaCha20Generator::~ChaCha20Generator() {
    unregister_generator(this);
    secure_zero(&key_, sizeof key_);
}

void ChaCha20Generator::lock_for_fork() { mutex_.lock(); }
void ChaCha20Generator::unlock_after_fork() { mutex_.unlock(); }

void ChaCha20Generator::rekey_from_os() {
    uint8_t buf[32];
    os_entropy(buf, sizeof buf);
    key_ = chacha20::key_from_bytes(buf);
    secure_zero(buf, sizeof buf);
    stream_id_ = 0;
    next_block_ = 0;
    pid_ = ::getpid();
}

uint64_t ChaCha20Generator::blocks_used() {
    std::lock_guard<std::mutex> lock(mutex_);
    return next_block_;
}

Reservation ChaCha20Generator::reserve(uint64_t nblocks) {
    std::lock_guard<std::mutex> lock(mutex_);
    // A forked child shares the parent's key and counter: re-key it, or both
    // processes would hand out the same noise.
    if (secure_ && ::getpid() != pid_) rekey_from_os();
    if (nblocks > UINT64_MAX - next_block_)  // next_block_ itself must not wrap
        throw std::overflow_error("vflsec: ChaCha20 block counter exhausted (2^64 - 1 blocks); create a new generator");
    Reservation r{key_, stream_id_, next_block_};
    next_block_ += nblocks;
    return r;
}

}  // namespace vflsec::noise
