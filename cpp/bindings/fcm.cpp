#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <tuple>

#include "fcm.hpp"

namespace py = pybind11;

namespace vflsec::bindings {
namespace {

template <typename T>
py::tuple fcm(py::array_t<T, py::array::c_style> X, std::size_t c, double m, int max_iter, double tol,
              bool start_from_centers, py::array_t<T, py::array::c_style> V, py::array_t<T, py::array::c_style> U) {
    const std::size_t n = static_cast<std::size_t>(X.shape(0)), d = static_cast<std::size_t>(X.shape(1));
    const T* x = X.data();
    T* v = V.mutable_data();
    T* u = U.mutable_data();
    py::array_t<std::int64_t> labels(static_cast<py::ssize_t>(n));
    py::array_t<T> confidence(static_cast<py::ssize_t>(n));
    std::int64_t* lp = labels.mutable_data();
    T* cp = confidence.mutable_data();
    FCMStatus st;
    {
        py::gil_scoped_release release;
        st = fuzzy_cmeans<T>(x, n, d, c, m, max_iter, tol, start_from_centers, v, u);
        hard_assignments<T>(u, n, c, lp, cp);
    }
    return py::make_tuple(st.n_iter, st.converged, st.objective, st.objective_history, labels, confidence);
}

}  // namespace

void bind_fcm(py::module_& m) {
    const auto args = std::make_tuple(py::arg("X"), py::arg("n_clusters"), py::arg("m"), py::arg("max_iter"),
                                      py::arg("tol"), py::arg("start_from_centers"), py::arg("centers"),
                                      py::arg("membership"));
    std::apply([&](auto... a) { m.def("fuzzy_cmeans_f32", &fcm<float>, a...); }, args);
    std::apply([&](auto... a) { m.def("fuzzy_cmeans_f64", &fcm<double>, a...); }, args);
}

}  // namespace vflsec::bindings
