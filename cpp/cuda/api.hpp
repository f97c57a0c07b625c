// Host-side interface of the CUDA kernels (vflsec._core_cuda), free of CUDA
// headers so that the pybind11 bindings compile with the host compiler.
//
// Every `Device` function takes raw device pointers allocated by the caller
// (torch tensors on device `device`) and enqueues its kernels on the caller's
// stream (torch.cuda.current_stream().cuda_stream); it returns as soon as
// the work is queued unless it documents a read-back. Every `Host` function
// runs the very same kernel bodies on the CPU over host memory: it exists to
// test the kernels where no GPU is present.
//
// Preconditions (checked by the Python wrappers in vflsec/kernels/_cuda.py):
// contiguous row-major data of the stated sizes, finite values, n, m, d >= 1.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace vflsec::cuda {

// Number of visible CUDA devices; 0 (never an error) without a driver or GPU.
int device_count();
// CUDART_VERSION this module was built against (13000 for CUDA 13.0). The
// runtime is linked statically and needs a driver of at least that version.
int runtime_version();
// Why device_count() is what it is: "2 CUDA device(s)" or the runtime's error
// (e.g. cudaErrorInsufficientDriver: the driver is older than the runtime).
std::string device_status();

// ---- pairwise distances -------------------------------------------------
// out[i * m + j] = ||X[i] - Y[j]|| (squared if `squared`), evaluated on the
// data times 2^-scale_exp and scaled back (scale_exp = 0: no scaling).
template <typename T>
void pairwise_distances_device(const T* X, std::size_t n, const T* Y, std::size_t m, std::size_t d, bool squared,
                               int scale_exp, T* out, int device, std::uintptr_t stream);
template <typename T>
void pairwise_distances_host(const T* X, std::size_t n, const T* Y, std::size_t m, std::size_t d, bool squared,
                             int scale_exp, T* out);

// Doubles of workspace pairwise_distance_stats needs for n rows.
std::size_t distance_stats_workspace(std::size_t n);
// result[0..4] = count, mean, std (ddof 0), min, max of ||X[j] - X[k]||, j < k,
// all in units of the scaled data (the caller multiplies by 2^scale_exp).
template <typename T>
void pairwise_distance_stats_device(const T* X, std::size_t n, std::size_t d, int scale_exp, double* workspace,
                                    double* result, int device, std::uintptr_t stream);
template <typename T>
void pairwise_distance_stats_host(const T* X, std::size_t n, std::size_t d, int scale_exp, double* workspace,
                                  double* result);

// ---- fuzzy c-means ------------------------------------------------------
struct FcmOutcome {
    std::vector<double> objective_history;
    int n_iter = 0;
    bool converged = false;
    double center_shift = 0.0;
    long long weightless_cluster = -1;
};

// Doubles of workspace fuzzy_cmeans needs.
std::size_t fcm_workspace(std::size_t n, std::size_t c, std::size_t d);

// centers_scratch: 2 * c * d values; with `centers_start` its first c * d
// hold the initial centres, otherwise init_membership (n x c) is the start.
// Writes centers (c x d), membership (n x c), labels (n), confidence (n).
// Reads three doubles back to the host per iteration (objective, shift,
// weightless cluster: the stopping test), so it returns when it is done.
template <typename T>
FcmOutcome fuzzy_cmeans_device(const T* X, std::size_t n, std::size_t d, std::size_t c, double m, int max_iter,
                               double tol, bool centers_start, const T* init_membership, T* centers_scratch,
                               T* centers, T* membership, std::int64_t* labels, T* confidence, double* workspace,
                               int device, std::uintptr_t stream);
template <typename T>
FcmOutcome fuzzy_cmeans_host(const T* X, std::size_t n, std::size_t d, std::size_t c, double m, int max_iter,
                             double tol, bool centers_start, const T* init_membership, T* centers_scratch,
                             T* centers, T* membership, std::int64_t* labels, T* confidence, double* workspace);

// ---- secure Gaussian noise ----------------------------------------------
// Blocks first_block, first_block + 1, ... of ChaCha20 stream `stream_id`
// under `key`, reserved by the caller from the vflsec.NoiseGenerator's own
// generator (its lock, counter, fork re-keying and overflow check apply
// unchanged, so GPU and CPU draws of one generator never share keystream and
// a seeded stream gives the CPU's values bit for bit). Value i comes from
// block first_block + i / 8 exactly as in cpp/noise.hpp.
struct NoiseKey {
    std::uint32_t words[8];
    std::uint64_t stream_id;
    std::uint64_t first_block;
};

enum class NoiseOp : int { kNormal = 0, kRaw = 1 };

// out (n values): sigma * N(0,1) as T (kNormal, computed in double and
// rounded once) or the raw uint64 words (kRaw; out is uint64).
template <typename T>
void noise_device(const NoiseKey& key, NoiseOp op, std::size_t n, double sigma, void* out, int device,
                  std::uintptr_t stream);
template <typename T>
void noise_host(const NoiseKey& key, NoiseOp op, std::size_t n, double sigma, void* out);

}  // namespace vflsec::cuda
