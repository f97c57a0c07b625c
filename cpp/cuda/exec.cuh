// Executors for the CUDA kernels of vflsec._core_cuda.
//
// Every kernel in this folder is a functor whose `operator()(std::size_t i)`
// is the whole work of one thread (one output tile, one point, one ChaCha20
// block, ...), declared __host__ __device__. DeviceExec launches it as a
// grid-stride loop on a caller-given stream; HostExec runs the same functor
// in a plain loop on the CPU. The host path exists so that the kernel bodies,
// including their indexing, are tested bit for bit against the CPU kernels on
// machines without a GPU: the only code that never runs there is the
// launcher below and the memory copies.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "host_device.hpp"  // VFLSEC_HD: __host__ __device__ __forceinline__

namespace vflsec::cuda {

inline void check(cudaError_t status, const char* what) {
    if (status != cudaSuccess)
        throw std::runtime_error(std::string("vflsec CUDA: ") + what + ": " + cudaGetErrorString(status));
}

template <class F>
__global__ void for_each_kernel(std::size_t count, F f) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride)
        f(i);
}

// Launches on `stream` of device `device` (the caller's torch stream): the
// work is ordered after whatever the caller queued there before, and the
// caller's later work after it, without any host synchronisation.
//
// The calling thread's current device is switched to `device` for the
// lifetime of the executor and switched back afterwards: the current device
// lives in the driver's per-thread context, which torch's runtime shares with
// this module's statically linked one, so leaving it changed would move
// torch.cuda.current_device() under the caller's feet.
struct DeviceExec {
    int device;
    int previous_device = -1;
    cudaStream_t stream;

    DeviceExec(int device_index, std::uintptr_t stream_handle)
        : device(device_index), stream(reinterpret_cast<cudaStream_t>(stream_handle)) {
        check(cudaGetDevice(&previous_device), "cudaGetDevice");
        if (previous_device != device) check(cudaSetDevice(device), "cudaSetDevice");
    }
    ~DeviceExec() {
        if (previous_device >= 0 && previous_device != device) cudaSetDevice(previous_device);
    }
    DeviceExec(const DeviceExec&) = delete;
    DeviceExec& operator=(const DeviceExec&) = delete;

    template <class F>
    void run(std::size_t count, const F& f) const {
        if (count == 0) return;
        constexpr unsigned kThreads = 256;
        // Beyond this many blocks the grid-stride loop takes over.
        constexpr std::size_t kMaxBlocks = std::size_t(1) << 20;
        std::size_t blocks = (count + kThreads - 1) / kThreads;
        if (blocks > kMaxBlocks) blocks = kMaxBlocks;
        for_each_kernel<F><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(count, f);
        check(cudaGetLastError(), "kernel launch");
    }

    void copy(void* dst, const void* src, std::size_t bytes) const {
        if (bytes != 0) check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync");
    }

    // Blocks until the stream has finished up to here, then copies.
    void read_back(void* host_dst, const void* src, std::size_t bytes) const {
        check(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
        check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    }
};

// The same functors on the CPU, one "thread" after another (test path).
struct HostExec {
    template <class F>
    void run(std::size_t count, const F& f) const {
        for (std::size_t i = 0; i < count; ++i) f(i);
    }
    void copy(void* dst, const void* src, std::size_t bytes) const {
        if (bytes != 0) std::memcpy(dst, src, bytes);
    }
    void read_back(void* host_dst, const void* src, std::size_t bytes) const { std::memcpy(host_dst, src, bytes); }
};

template <typename T>
VFLSEC_HD T min_of(T a, T b) {
    return b < a ? b : a;
}

// Precision-explicit math (no reliance on overload sets that differ between
// the host and device compilers). sqrt and division are correctly rounded on
// both sides (nvcc's defaults -prec-sqrt=true -prec-div=true).
VFLSEC_HD float sqrt_of(float v) { return sqrtf(v); }
VFLSEC_HD double sqrt_of(double v) { return sqrt(v); }
VFLSEC_HD float fma_of(float a, float b, float c) { return fmaf(a, b, c); }
VFLSEC_HD double fma_of(double a, double b, double c) { return fma(a, b, c); }
VFLSEC_HD float pow_of(float a, float b) { return powf(a, b); }
VFLSEC_HD double pow_of(double a, double b) { return pow(a, b); }
// v * 2^e, exact unless the result leaves the normal range of T; for float
// through double, where every such product of a float is exact.
VFLSEC_HD float ldexp_of(float v, int e) { return static_cast<float>(ldexp(static_cast<double>(v), e)); }
VFLSEC_HD double ldexp_of(double v, int e) { return ldexp(v, e); }

}  // namespace vflsec::cuda
