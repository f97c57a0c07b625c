// Secure Gaussian noise on the GPU: counter-mode ChaCha20 and the constant-
// time Box-Muller transform of cpp/noise.cpp, one thread per 64-byte block.
//
// Bit-identical to the CPU: the stream layout (value i from block
// first + i / 8, pair k from words 2k and 2k + 1) is the CPU's, and the block
// function and the transform are the very code the CPU runs
// (cpp/chacha20_block.hpp, cpp/box_muller.hpp: __host__ __device__ under
// nvcc). +, -, *, / and sqrt are correctly rounded in double on the GPU, and
// this file is compiled with -fmad=false (device) and -ffp-contract=off
// (host) so that no multiply-add is fused, as cpp/noise.cpp is compiled with
// -ffp-contract=off. No cuRAND: its generators are not cryptographic.
//
// Key hygiene: the key travels to the GPU by value in the kernel's parameters
// (constant memory of the launch); nothing else stores it on the device, and
// the host copy is wiped after the launch.
#include "api.hpp"
#include "box_muller.hpp"
#include "chacha20_block.hpp"
#include "exec.cuh"
#include "secure_zero.hpp"

namespace vflsec::cuda {
namespace {

VFLSEC_HD std::uint64_t word64(const std::uint32_t (&w)[16], int lo) {
    return static_cast<std::uint64_t>(w[lo]) | (static_cast<std::uint64_t>(w[lo + 1]) << 32);
}

// One thread: block first_block + b, i.e. values [8 b, min(8 b + 8, n)).
template <typename T>
struct NoiseBlocks {
    std::uint32_t key[8];
    std::uint64_t stream_id;
    std::uint64_t first_block;
    std::size_t n;
    NoiseOp op;
    double sigma;
    void* out;

    VFLSEC_HD void operator()(std::size_t b) const {
        std::uint32_t w[16];
        chacha20::block_at(key, stream_id, first_block + b, w);
        const std::size_t pos = 8 * b;
        const std::size_t count = min_of<std::size_t>(8, n - pos);
        if (op == NoiseOp::kRaw) {
            std::uint64_t* o = static_cast<std::uint64_t*>(out) + pos;
            for (std::size_t k = 0; k < count; ++k) o[k] = word64(w, static_cast<int>(2 * k));
            return;
        }
        double z[8];
        for (int p = 0; p < 4; ++p)
            box_muller::transform(word64(w, 4 * p), word64(w, 4 * p + 2), z[2 * p], z[2 * p + 1]);
        T* o = static_cast<T*>(out) + pos;
        for (std::size_t i = 0; i < count; ++i) o[i] = static_cast<T>(z[i] * sigma);
    }
};

template <typename T, class Exec>
void noise_run(const Exec& exec, const NoiseKey& key, NoiseOp op, std::size_t n, double sigma, void* out) {
    if (n == 0) return;
    NoiseBlocks<T> f;
    for (int i = 0; i < 8; ++i) f.key[i] = key.words[i];
    f.stream_id = key.stream_id;
    f.first_block = key.first_block;
    f.n = n;
    f.op = op;
    f.sigma = sigma;
    f.out = out;
    const std::size_t nblocks = n / 8 + (n % 8 != 0);
    exec.run(nblocks, f);
    secure_zero(f.key, sizeof f.key);  // the launch has copied its parameters
}

}  // namespace

template <typename T>
void noise_device(const NoiseKey& key, NoiseOp op, std::size_t n, double sigma, void* out, int device,
                  std::uintptr_t stream) {
    noise_run<T>(DeviceExec(device, stream), key, op, n, sigma, out);
}
template <typename T>
void noise_host(const NoiseKey& key, NoiseOp op, std::size_t n, double sigma, void* out) {
    noise_run<T>(HostExec(), key, op, n, sigma, out);
}

template void noise_device<float>(const NoiseKey&, NoiseOp, std::size_t, double, void*, int, std::uintptr_t);
template void noise_device<double>(const NoiseKey&, NoiseOp, std::size_t, double, void*, int, std::uintptr_t);
template void noise_host<float>(const NoiseKey&, NoiseOp, std::size_t, double, void*);
template void noise_host<double>(const NoiseKey&, NoiseOp, std::size_t, double, void*);

}  // namespace vflsec::cuda
