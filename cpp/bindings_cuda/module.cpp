// vflsec._core_cuda: the CUDA kernels (cpp/cuda). Built only when CMake finds
// a CUDA toolkit; links the CUDA runtime statically, so it imports on machines
// without a GPU or driver (device_count() is then 0).
//
// The Python wrappers (python/vflsec/kernels/_cuda.py) validate every
// argument, allocate every output and workspace with torch on the input's
// device, and pass raw device pointers, sizes, the device index and the
// current torch stream as integers: this module never allocates device
// memory, links no torch, and releases the GIL around every call.
//
// The `_host_*` functions run the same kernel bodies on the CPU over numpy
// arrays: test hooks that check the kernels where no GPU is present.
//
// Noise draws take the generator behind a vflsec.NoiseGenerator, a
// vflsec._core.ChaCha20Generator. This module registers no Python type for it
// (pybind11 fails the import of a module that registers a C++ type a second
// time): its casters find _core's registration in pybind11's internals, which
// modules built with the same pybind11 ABI share. Only the generator's code
// (chacha20_generator.cpp, the vflsec_chacha20_generator library) is linked
// in; the CPU noise kernels are not.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "../cuda/api.hpp"
#include "chacha20_generator.hpp"
#include "secure_zero.hpp"

namespace py = pybind11;

namespace vflsec::cuda {
namespace {

using Ptr = std::uintptr_t;
template <typename T>
using CArray = py::array_t<T, py::array::c_style>;

template <typename T>
const T* cptr(Ptr p) {
    return reinterpret_cast<const T*>(p);
}
template <typename T>
T* mptr(Ptr p) {
    return reinterpret_cast<T*>(p);
}

// Claims the blocks for n values from the generator behind a
// vflsec.NoiseGenerator (thread-safe; re-keys a secure one after fork).
NoiseKey reserve(noise::ChaCha20Generator& generator, std::size_t n) {
    const std::uint64_t nblocks = n / 8 + (n % 8 != 0);
    noise::Reservation r = generator.reserve(nblocks);
    NoiseKey key;
    for (int i = 0; i < 8; ++i) key.words[i] = r.key.w[i];
    key.stream_id = r.stream_id;
    key.first_block = r.first_block;
    secure_zero(&r, sizeof r);
    return key;
}

py::tuple outcome_tuple(const FcmOutcome& o) {
    return py::make_tuple(o.objective_history, o.n_iter, o.converged, o.center_shift, o.weightless_cluster);
}

template <typename T>
void bind_typed(py::module_& m, const char* suffix) {
    const std::string s(suffix);
    m.def(("pairwise_distances" + s).c_str(),
          [](Ptr x, std::size_t n, Ptr y, std::size_t mm, std::size_t d, bool squared, int scale_exp, Ptr out,
             int device, Ptr stream) {
              py::gil_scoped_release release;
              pairwise_distances_device<T>(cptr<T>(x), n, cptr<T>(y), mm, d, squared, scale_exp, mptr<T>(out),
                                           device, stream);
          },
          py::arg("x"), py::arg("n"), py::arg("y"), py::arg("m"), py::arg("d"), py::arg("squared"),
          py::arg("scale_exp"), py::arg("out"), py::arg("device"), py::arg("stream"));
    m.def(("pairwise_distance_stats" + s).c_str(),
          [](Ptr x, std::size_t n, std::size_t d, int scale_exp, Ptr workspace, Ptr result, int device, Ptr stream) {
              py::gil_scoped_release release;
              pairwise_distance_stats_device<T>(cptr<T>(x), n, d, scale_exp, mptr<double>(workspace),
                                                mptr<double>(result), device, stream);
          },
          py::arg("x"), py::arg("n"), py::arg("d"), py::arg("scale_exp"), py::arg("workspace"), py::arg("result"),
          py::arg("device"), py::arg("stream"));
    m.def(("fuzzy_cmeans" + s).c_str(),
          [](Ptr x, std::size_t n, std::size_t d, std::size_t c, double fuzzifier, int max_iter, double tol,
             bool centers_start, Ptr init_membership, Ptr centers_scratch, Ptr centers, Ptr membership, Ptr labels,
             Ptr confidence, Ptr workspace, int device, Ptr stream) {
              FcmOutcome o;
              {
                  py::gil_scoped_release release;
                  o = fuzzy_cmeans_device<T>(cptr<T>(x), n, d, c, fuzzifier, max_iter, tol, centers_start,
                                             cptr<T>(init_membership), mptr<T>(centers_scratch), mptr<T>(centers),
                                             mptr<T>(membership), mptr<std::int64_t>(labels), mptr<T>(confidence),
                                             mptr<double>(workspace), device, stream);
              }
              return outcome_tuple(o);
          },
          py::arg("x"), py::arg("n"), py::arg("d"), py::arg("c"), py::arg("m"), py::arg("max_iter"), py::arg("tol"),
          py::arg("centers_start"), py::arg("init_membership"), py::arg("centers_scratch"), py::arg("centers"),
          py::arg("membership"), py::arg("labels"), py::arg("confidence"), py::arg("workspace"), py::arg("device"),
          py::arg("stream"),
          "Returns (objective_history, n_iter, converged, center_shift, weightless_cluster).");
    m.def(("fill_normal" + s).c_str(),
          [](noise::ChaCha20Generator& gen, Ptr out, std::size_t n, double sigma, int device, Ptr stream) {
              py::gil_scoped_release release;
              NoiseKey key = reserve(gen, n);
              noise_device<T>(key, NoiseOp::kNormal, n, sigma, mptr<void>(out), device, stream);
              secure_zero(&key, sizeof key);
          },
          py::arg("generator"), py::arg("out"), py::arg("n"), py::arg("sigma"), py::arg("device"), py::arg("stream"));

    // ---- host emulation (tests) ----
    m.def(("_host_pairwise_distances" + s).c_str(),
          [](const CArray<T>& X, const CArray<T>& Y, bool squared, int scale_exp) {
              if (X.ndim() != 2 || Y.ndim() != 2 || X.shape(1) != Y.shape(1) || X.shape(0) < 1 || Y.shape(0) < 1 ||
                  X.shape(1) < 1)
                  throw std::invalid_argument("X and Y must be non-empty 2-D arrays with equal columns");
              CArray<T> out({X.shape(0), Y.shape(0)});
              pairwise_distances_host<T>(X.data(), X.shape(0), Y.data(), Y.shape(0), X.shape(1), squared, scale_exp,
                                         out.mutable_data());
              return out;
          },
          py::arg("X"), py::arg("Y"), py::arg("squared"), py::arg("scale_exp"));
    m.def(("_host_pairwise_distance_stats" + s).c_str(),
          [](const CArray<T>& X, int scale_exp) {
              if (X.ndim() != 2 || X.shape(0) < 2 || X.shape(1) < 1)
                  throw std::invalid_argument("X must be 2-D with at least 2 rows");
              const auto n = static_cast<std::size_t>(X.shape(0));
              CArray<double> workspace(static_cast<py::ssize_t>(distance_stats_workspace(n)));
              double result[5];
              pairwise_distance_stats_host<T>(X.data(), n, X.shape(1), scale_exp, workspace.mutable_data(), result);
              return py::make_tuple(result[0], result[1], result[2], result[3], result[4]);
          },
          py::arg("X"), py::arg("scale_exp"));
    m.def(("_host_fuzzy_cmeans" + s).c_str(),
          [](const CArray<T>& X, std::size_t c, double fuzzifier, int max_iter, double tol, py::object init_centers,
             py::object init_membership) {
              if (X.ndim() != 2 || c < 2 || static_cast<std::size_t>(X.shape(0)) < c || max_iter < 1)
                  throw std::invalid_argument("inconsistent sizes");
              const auto n = static_cast<std::size_t>(X.shape(0));
              const auto d = static_cast<std::size_t>(X.shape(1));
              CArray<T> scratch(static_cast<py::ssize_t>(2 * c * d));
              CArray<T> start;
              const bool centers_start = !init_centers.is_none();
              if (centers_start) {
                  CArray<T> v = init_centers.cast<CArray<T>>();
                  if (v.size() != static_cast<py::ssize_t>(c * d)) throw std::invalid_argument("init_centers size");
                  std::copy(v.data(), v.data() + c * d, scratch.mutable_data());
              } else {
                  start = init_membership.cast<CArray<T>>();
                  if (start.size() != static_cast<py::ssize_t>(n * c))
                      throw std::invalid_argument("init_membership size");
              }
              CArray<T> centers({c, d}), membership({n, c}), confidence(static_cast<py::ssize_t>(n));
              py::array_t<std::int64_t> labels(static_cast<py::ssize_t>(n));
              CArray<double> workspace(static_cast<py::ssize_t>(fcm_workspace(n, c, d)));
              const FcmOutcome o = fuzzy_cmeans_host<T>(
                  X.data(), n, d, c, fuzzifier, max_iter, tol, centers_start, centers_start ? nullptr : start.data(),
                  scratch.mutable_data(), centers.mutable_data(), membership.mutable_data(), labels.mutable_data(),
                  confidence.mutable_data(), workspace.mutable_data());
              return py::make_tuple(centers, membership, labels, confidence, outcome_tuple(o));
          },
          py::arg("X"), py::arg("c"), py::arg("m"), py::arg("max_iter"), py::arg("tol"),
          py::arg("init_centers") = py::none(), py::arg("init_membership") = py::none());
    m.def(("_host_normal" + s).c_str(),
          [](noise::ChaCha20Generator& gen, std::size_t n, double sigma) {
              CArray<T> out(static_cast<py::ssize_t>(n));
              NoiseKey key = reserve(gen, n);
              noise_host<T>(key, NoiseOp::kNormal, n, sigma, out.mutable_data());
              secure_zero(&key, sizeof key);
              return out;
          },
          py::arg("generator"), py::arg("n"), py::arg("sigma"));
}

}  // namespace
}  // namespace vflsec::cuda

PYBIND11_MODULE(_core_cuda, m) {
    using namespace vflsec::cuda;
    m.doc() = "vflsec CUDA kernels (private: use vflsec.kernels with CUDA torch tensors)";
    m.def("device_count", &device_count, "Visible CUDA devices; 0 without a driver or GPU.");
    m.def("runtime_version", &runtime_version, "CUDART_VERSION this module was built with (e.g. 13000).");
    m.def("device_status", &device_status, "'<n> CUDA device(s)', or why none can be used (e.g. driver too old).");
    m.def("distance_stats_workspace", &distance_stats_workspace, py::arg("n"),
          "float64 elements of workspace pairwise_distance_stats needs for n rows.");
    m.def("fcm_workspace", &fcm_workspace, py::arg("n"), py::arg("c"), py::arg("d"),
          "float64 elements of workspace fuzzy_cmeans needs.");
    bind_typed<float>(m, "_f32");
    bind_typed<double>(m, "_f64");
    m.def(
        "fill_raw",
        [](vflsec::noise::ChaCha20Generator& gen, std::uintptr_t out, std::size_t n, int device, std::uintptr_t stream) {
            py::gil_scoped_release release;
            NoiseKey key = reserve(gen, n);
            noise_device<double>(key, NoiseOp::kRaw, n, 1.0, reinterpret_cast<void*>(out), device, stream);
            vflsec::secure_zero(&key, sizeof key);
        },
        py::arg("generator"), py::arg("out"), py::arg("n"), py::arg("device"), py::arg("stream"),
        "n raw uint64 keystream words into device memory (test hook: compare with NoiseGenerator.random_raw).");
}
