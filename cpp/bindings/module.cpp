// The single entry point of vflsec._core. Each kernel family registers its
// functions from its own file in this folder; the Python wrappers in
// python/vflsec validate every argument before calling in, so bindings check
// nothing beyond what pybind11's type casters already enforce.
#include <pybind11/pybind11.h>
#include <omp.h>

#include <stdexcept>
#include <string>

#include "isa_dispatch.hpp"

namespace py = pybind11;

namespace vflsec::bindings {
void bind_distances(py::module_& m);
void bind_fcm(py::module_& m);
void bind_noise(py::module_& m);
void bind_paillier(py::module_& m);
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
    f["avx512dq"] = static_cast<bool>(__builtin_cpu_supports("avx512dq"));
    f["avx512vl"] = static_cast<bool>(__builtin_cpu_supports("avx512vl"));
    f["avx512ifma"] = static_cast<bool>(__builtin_cpu_supports("avx512ifma"));
    f["aes"] = static_cast<bool>(__builtin_cpu_supports("aes"));
    return f;
}

vflsec::isa::Family* const kFamilies[] = {&vflsec::isa::noise_family(), &vflsec::isa::distances_family(),
                                          &vflsec::isa::fcm_family()};

vflsec::isa::Family& family_named(const std::string& name) {
    for (vflsec::isa::Family* f : kFamilies)
        if (name == f->name()) return *f;
    throw std::invalid_argument("unknown kernel family '" + name + "'; expected noise, distances or fcm");
}

// {family: path in use} (isa_dispatch.hpp).
py::dict kernel_isa() {
    py::dict d;
    for (vflsec::isa::Family* f : kFamilies) d[f->name()] = std::string(f->current());
    return d;
}

// {family: [the paths this CPU supports, most portable first]}.
py::dict supported_kernel_isas() {
    py::dict d;
    for (vflsec::isa::Family* f : kFamilies) {
        py::list paths;
        for (int i = 0; i < f->size(); ++i)
            if (f->supported(i)) paths.append(std::string(f->path_name(i)));
        d[f->name()] = paths;
    }
    return d;
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
    m.def("kernel_isa", &kernel_isa, "The ISA path each kernel family uses: {'noise': ..., 'distances': ..., 'fcm': ...}.");
    m.def("_supported_kernel_isas", &supported_kernel_isas,
          "Test hook: the ISA paths of each kernel family this CPU supports, most portable first.");
    m.def(
        "_select_kernel_isa",
        [](const std::string& family, const std::string& path) {
            return std::string(family_named(family).select(path.c_str()));
        },
        py::arg("family"), py::arg("path"),
        "Test hook: force a kernel family's ISA path ('auto': the CPU's best); returns the path in use. "
        "ValueError for an unknown family or path, or one this CPU lacks.");
    vflsec::bindings::bind_distances(m);
    vflsec::bindings::bind_fcm(m);
    vflsec::bindings::bind_noise(m);
    vflsec::bindings::bind_paillier(m);
}
