// Python bindings of the distance kernels. The wrapper in
// python/vflsec/kernels/distances.py validates and converts every argument
// (C-contiguous, same dtype, matching d, no NaN/inf, n >= 1, d >= 1), so these
// functions only check the shape relations the C++ core relies on for memory
// safety (so a direct call into _core raises instead of reading out of
// bounds or dividing by zero), unpack shapes and release the GIL.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <stdexcept>
#include <string>

#include "distances.hpp"

namespace py = pybind11;

namespace vflsec::bindings {
namespace {

template <typename T>
using CArray = py::array_t<T, py::array::c_style>;

template <typename T>
py::array_t<T> pairwise_distances_impl(const CArray<T>& X, const CArray<T>& Y, bool squared) {
    if (X.ndim() != 2 || Y.ndim() != 2) throw std::invalid_argument("X and Y must be 2-D");
    if (X.shape(0) < 1 || X.shape(1) < 1 || Y.shape(0) < 1 || X.shape(1) != Y.shape(1))
        throw std::invalid_argument("inconsistent sizes (validate through vflsec.kernels.pairwise_distances)");
    const auto n = static_cast<std::size_t>(X.shape(0));
    const auto d = static_cast<std::size_t>(X.shape(1));
    const auto m = static_cast<std::size_t>(Y.shape(0));
    py::array_t<T> out({X.shape(0), Y.shape(0)});
    const T* x = X.data();
    const T* y = Y.data();
    T* o = out.mutable_data();
    {
        py::gil_scoped_release release;
        vflsec::pairwise_distances<T>(x, n, y, m, d, squared, o);
    }
    return out;
}

template <typename T>
py::tuple pairwise_distance_stats_impl(const CArray<T>& X) {
    if (X.ndim() != 2) throw std::invalid_argument("X must be 2-D");
    if (X.shape(0) < 2 || X.shape(1) < 1)
        throw std::invalid_argument("X needs at least 2 rows and 1 column (validate through "
                                    "vflsec.kernels.pairwise_distance_stats)");
    const auto n = static_cast<std::size_t>(X.shape(0));
    const auto d = static_cast<std::size_t>(X.shape(1));
    const T* x = X.data();
    DistanceStatsResult s;
    {
        py::gil_scoped_release release;
        s = vflsec::pairwise_distance_stats<T>(x, n, d);
    }
    return py::make_tuple(s.count, s.mean, s.std, s.min, s.max);
}

}  // namespace

void bind_distances(py::module_& m) {
    m.def("pairwise_distances_f32", &pairwise_distances_impl<float>, py::arg("X"), py::arg("Y"), py::arg("squared"));
    m.def("pairwise_distances_f64", &pairwise_distances_impl<double>, py::arg("X"), py::arg("Y"), py::arg("squared"));
    m.def("pairwise_distance_stats_f32", &pairwise_distance_stats_impl<float>, py::arg("X"),
          "(count, mean, std, min, max) over the pairs j < k");
    m.def("pairwise_distance_stats_f64", &pairwise_distance_stats_impl<double>, py::arg("X"),
          "(count, mean, std, min, max) over the pairs j < k");
}

}  // namespace vflsec::bindings
