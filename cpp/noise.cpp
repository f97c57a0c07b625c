// Secure Gaussian noise kernels; see noise.hpp for the stream layout.
//
// Bit-identical results on every ISA path rest on three things: each path
// evaluates the same IEEE operations in the same order (GCC vectorizes the
// lane loops without reassociating), +, *, / and sqrt are correctly rounded
// everywhere, and this file is compiled with -ffp-contract=off so the AVX-512
// path cannot fuse a multiply-add that the SSE2 path rounds twice. The
// transform itself (box_muller.hpp) is shared with the CUDA kernels.
#include "noise.hpp"

#include "box_muller.hpp"
#include "isa_dispatch.hpp"
#include "parallel.hpp"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>
#include <system_error>

namespace vflsec::noise {

namespace {

using chacha20::Key;

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

namespace {

using box_muller::is_finite_bits;

// ---------------------------------------------------------------------------
// block-range kernels, instantiated once per ISA with its natural lane count
// ---------------------------------------------------------------------------

enum class Op { kNormalF64, kNormalF32, kAddF64, kAddF32, kRaw };

struct Job {
    Key key;
    uint64_t stream_id;
    uint64_t first_block;
    size_t n;  // values requested
    Op op;
    double sigma;
    const void* x;
    void* out;
};

// Words of L blocks (lane-major) -> 8L normals in stream order.
template <int L>
VFLSEC_ALWAYS_INLINE void normals_from_words(const uint32_t (&w)[16][L], double* z) {
    alignas(64) double z0[4][L];
    alignas(64) double z1[4][L];
    for (int p = 0; p < 4; ++p) {
        for (int j = 0; j < L; ++j) {
            const uint64_t a = static_cast<uint64_t>(w[4 * p][j]) | (static_cast<uint64_t>(w[4 * p + 1][j]) << 32);
            const uint64_t b = static_cast<uint64_t>(w[4 * p + 2][j]) | (static_cast<uint64_t>(w[4 * p + 3][j]) << 32);
            box_muller::transform(a, b, z0[p][j], z1[p][j]);
        }
    }
    for (int j = 0; j < L; ++j) {
        for (int p = 0; p < 4; ++p) {
            z[8 * j + 2 * p] = z0[p][j];
            z[8 * j + 2 * p + 1] = z1[p][j];
        }
    }
}

template <int L>
VFLSEC_ALWAYS_INLINE void raw_from_words(const uint32_t (&w)[16][L], uint64_t* r) {
    for (int j = 0; j < L; ++j)
        for (int k = 0; k < 8; ++k)
            r[8 * j + k] = static_cast<uint64_t>(w[2 * k][j]) | (static_cast<uint64_t>(w[2 * k + 1][j]) << 32);
}

// Values [8 b0, min(8 b1, n)) of the job: blocks b0 .. b1-1 of the request.
template <int L>
VFLSEC_ALWAYS_INLINE size_t run_blocks(const Job& job, uint64_t b0, uint64_t b1) {
    alignas(64) uint32_t w[16][L];
    alignas(64) double z[8 * L];
    size_t nonfinite = 0;
    const double sigma = job.sigma;
    for (uint64_t b = b0; b < b1; b += L) {
        chacha20::blocks_lanes<L>(job.key, job.stream_id, job.first_block + b, w);
        const size_t pos = static_cast<size_t>(b) * 8;
        const size_t count = std::min<size_t>(static_cast<size_t>(std::min<uint64_t>(b1 - b, L)) * 8, job.n - pos);
        switch (job.op) {
            case Op::kRaw: {
                alignas(64) uint64_t r[8 * L];
                raw_from_words<L>(w, r);
                std::memcpy(static_cast<uint64_t*>(job.out) + pos, r, count * sizeof(uint64_t));
                break;
            }
            case Op::kNormalF64: {
                normals_from_words<L>(w, z);
                double* o = static_cast<double*>(job.out) + pos;
                for (size_t i = 0; i < count; ++i) o[i] = z[i] * sigma;
                break;
            }
            case Op::kNormalF32: {
                normals_from_words<L>(w, z);
                float* o = static_cast<float*>(job.out) + pos;
                for (size_t i = 0; i < count; ++i) o[i] = static_cast<float>(z[i] * sigma);
                break;
            }
            case Op::kAddF64: {
                normals_from_words<L>(w, z);
                const double* x = static_cast<const double*>(job.x) + pos;
                double* o = static_cast<double*>(job.out) + pos;
                size_t bad = 0;
                for (size_t i = 0; i < count; ++i) {
                    const double v = x[i] + z[i] * sigma;
                    o[i] = v;
                    bad += is_finite_bits(v) ? 0 : 1;
                }
                nonfinite += bad;
                break;
            }
            case Op::kAddF32: {
                normals_from_words<L>(w, z);
                const float* x = static_cast<const float*>(job.x) + pos;
                float* o = static_cast<float*>(job.out) + pos;
                size_t bad = 0;
                for (size_t i = 0; i < count; ++i) {
                    const float v = static_cast<float>(static_cast<double>(x[i]) + z[i] * sigma);
                    o[i] = v;
                    bad += is_finite_bits(v) ? 0 : 1;
                }
                nonfinite += bad;
                break;
            }
        }
    }
    secure_zero(w, sizeof w);
    return nonfinite;
}

__attribute__((target("avx512f"))) size_t run_avx512(const Job& job, uint64_t b0, uint64_t b1) {
    return run_blocks<16>(job, b0, b1);
}
__attribute__((target("avx2"))) size_t run_avx2(const Job& job, uint64_t b0, uint64_t b1) {
    return run_blocks<8>(job, b0, b1);
}
size_t run_default(const Job& job, uint64_t b0, uint64_t b1) { return run_blocks<4>(job, b0, b1); }

using RunFn = size_t (*)(const Job&, uint64_t, uint64_t);
// Indexed like the paths of isa::noise_family() below.
constexpr RunFn kRun[] = {run_default, run_avx2, run_avx512};

size_t execute(const Job& job) {
    const uint64_t nblocks = job.n / 8 + (job.n % 8 != 0);
    const RunFn fn = isa::noise_family().pick(kRun);
    return sum_over_block_ranges(nblocks, [&](uint64_t b0, uint64_t b1) { return fn(job, b0, b1); });
}

}  // namespace

// ---------------------------------------------------------------------------
// generator
// ---------------------------------------------------------------------------

// Fork safety. A fork copies only the forking thread; a generator mutex that
// another thread held at that moment would stay locked in the child forever.
// Every live generator is registered; pthread_atfork's prepare handler takes
// the registry lock and every generator's lock (so no reservation is half
// done), and both parent and child release them (in the child the forking
// thread owns them). The child also marks itself so kernels run on one thread
// (parallel.hpp). Lock order: registry, then generators; reserve() takes only
// its own generator's lock.
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

namespace {

size_t run_job(ChaCha20Generator& gen, Op op, size_t n, double sigma, const void* x, void* out) {
    if (n == 0) return 0;
    const uint64_t nblocks = n / 8 + (n % 8 != 0);
    Reservation r = gen.reserve(nblocks);
    Job job{r.key, r.stream_id, r.first_block, n, op, sigma, x, out};
    secure_zero(&r, sizeof r);
    const size_t nonfinite = execute(job);
    secure_zero(&job.key, sizeof job.key);
    return nonfinite;
}

}  // namespace

void ChaCha20Generator::fill_normal_f64(double* out, size_t n, double sigma) {
    run_job(*this, Op::kNormalF64, n, sigma, nullptr, out);
}
void ChaCha20Generator::fill_normal_f32(float* out, size_t n, double sigma) {
    run_job(*this, Op::kNormalF32, n, sigma, nullptr, out);
}
size_t ChaCha20Generator::add_normal_f64(const double* x, double* out, size_t n, double sigma) {
    return run_job(*this, Op::kAddF64, n, sigma, x, out);
}
size_t ChaCha20Generator::add_normal_f32(const float* x, float* out, size_t n, double sigma) {
    return run_job(*this, Op::kAddF32, n, sigma, x, out);
}
void ChaCha20Generator::fill_raw(uint64_t* out, size_t n) { run_job(*this, Op::kRaw, n, 1.0, nullptr, out); }

// ---------------------------------------------------------------------------
// test hooks
// ---------------------------------------------------------------------------

void log_unit_interval(const double* u, double* out, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = box_muller::log_positive(u[i]);
}

void sincos_quarter(const double* x, double* sin_out, double* cos_out, size_t n) {
    for (size_t i = 0; i < n; ++i) box_muller::sincos_small(x[i], sin_out[i], cos_out[i]);
}

const char* select_isa(const char* name) { return isa::noise_family().select(name); }

const char* current_isa() { return isa::noise_family().current(); }

}  // namespace vflsec::noise

namespace vflsec::isa {

// The avx512f path requires DQ and VL besides F: the lattice release's vector
// kernel (lattice_gaussian.cpp) uses them. Every AVX-512 CPU since Skylake-X
// and Zen 4 has all three; a CPU without them (Xeon Phi) takes the avx2 path.
constexpr Path kNoisePaths[] = {{"default", 0}, {"avx2", kAvx2}, {"avx512f", kAvx512F | kAvx512Dq | kAvx512Vl}};

Family& noise_family() {
    static Family family("noise", kNoisePaths);
    return family;
}

}  // namespace vflsec::isa
