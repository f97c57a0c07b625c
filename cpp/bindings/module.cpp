// The single entry point of vflsec._core. Each kernel family registers its
// functions from its own file in this folder; the Python wrappers in
// python/vflsec validate every argument before calling in, so bindings check
// nothing beyond what pybind11's type casters already enforce.
#include <pybind11/pybind11.h>
#include <omp.h>

#include <string>

namespace py = pybind11;

namespace vflsec::bindings {
void bind_distances(py::module_& m);
void bind_fcm(py::module_& m);
void bind_noise(py::module_& m);
}  // namespace vflsec::bindings

namespace {

py::dict cpu_features() {
    __builtin_cpu_init();
    py::dict f;
    f["sse4_2"] = static_cast<bool>(__builtin_cpu_supports("sse4.2"));
    f["avx"] = static_cast<bool>(__builtin_cpu_supports("avx"));
    f["avx2"] = static_cast<bool>(__builtin_cpu_supports("avx2"));
    f["fma"] = static_cast<bool>(__builtin_cpu_supports("fma"));
    f["avx512f"] = static_cast<bool>(__builtin_cpu_supports("avx512f"));
    f["aes"] = static_cast<bool>(__builtin_cpu_supports("aes"));
    return f;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
    m.doc() = "vflsec compiled kernels (private: use vflsec.kernels)";
#ifdef VFLSEC_VERSION
    m.attr("__version__") = VFLSEC_VERSION;
#endif
    m.def("set_num_threads", [](int n) { omp_set_num_threads(n); });
    m.def("get_num_threads", []() { return omp_get_max_threads(); });
    m.def("cpu_features", &cpu_features);
    vflsec::bindings::bind_distances(m);
    vflsec::bindings::bind_fcm(m);
    vflsec::bindings::bind_noise(m);
}
