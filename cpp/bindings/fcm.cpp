// Binding for fuzzy c-means. vflsec.kernels.fuzzy_cmeans validates every
// argument; the only checks here are the shape relations the C++ core relies
// on for memory safety, so a direct call into _core cannot read out of bounds.
#include "fcm.hpp"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <stdexcept>

namespace py = pybind11;

namespace vflsec::bindings {
namespace {

template <typename T>
using CArray = py::array_t<T, py::array::c_style>;

template <typename T>
py::tuple fuzzy_cmeans(CArray<T> x, std::size_t n_clusters, double m, int max_iter, double tol,
                       py::object init_centers, py::object init_membership) {
    if (x.ndim() != 2) throw std::invalid_argument("x must be 2-D");
    const auto n = static_cast<std::size_t>(x.shape(0));
    const auto d = static_cast<std::size_t>(x.shape(1));
    const std::size_t c = n_clusters;
    if (n == 0 || d == 0 || c < 2 || c > n || max_iter < 1)
        throw std::invalid_argument("inconsistent sizes (validate through vflsec.kernels.fuzzy_cmeans)");

    CArray<T> centers_in, membership_in;
    const T* centers_ptr = nullptr;
    const T* membership_ptr = nullptr;
    if (!init_centers.is_none()) {
        centers_in = init_centers.cast<CArray<T>>();
        if (centers_in.ndim() != 2 || static_cast<std::size_t>(centers_in.shape(0)) != c ||
            static_cast<std::size_t>(centers_in.shape(1)) != d)
            throw std::invalid_argument("init_centers must have shape (n_clusters, d)");
        centers_ptr = centers_in.data();
    }
    if (!init_membership.is_none()) {
        membership_in = init_membership.cast<CArray<T>>();
        if (membership_in.ndim() != 2 || static_cast<std::size_t>(membership_in.shape(0)) != n ||
            static_cast<std::size_t>(membership_in.shape(1)) != c)
            throw std::invalid_argument("init_membership must have shape (n, n_clusters)");
        membership_ptr = membership_in.data();
    }
    if ((centers_ptr == nullptr) == (membership_ptr == nullptr))
        throw std::invalid_argument("exactly one of init_centers and init_membership is required");

    CArray<T> centers({c, d});
    CArray<T> membership({n, c});
    py::array_t<std::int64_t> labels(static_cast<py::ssize_t>(n));
    CArray<T> confidence(static_cast<py::ssize_t>(n));
    fcm::Options options;
    options.m = m;
    options.max_iter = max_iter;
    options.tol = tol;
    fcm::Outcome outcome;
    {
        const T* xp = x.data();
        T* cp = centers.mutable_data();
        T* up = membership.mutable_data();
        std::int64_t* lp = labels.mutable_data();
        T* fp = confidence.mutable_data();
        py::gil_scoped_release release;
        outcome = fcm::fuzzy_cmeans<T>(xp, n, d, c, options, centers_ptr, membership_ptr, cp, up, lp, fp);
    }
    py::array_t<double> history(static_cast<py::ssize_t>(outcome.objective_history.size()));
    std::copy(outcome.objective_history.begin(), outcome.objective_history.end(), history.mutable_data());
    return py::make_tuple(centers, membership, labels, confidence, history, outcome.n_iter, outcome.converged,
                          outcome.center_shift, static_cast<std::int64_t>(outcome.weightless_cluster));
}

}  // namespace

void bind_fcm(py::module_& m) {
    const char* doc =
        "Fuzzy c-means core (private: use vflsec.kernels.fuzzy_cmeans). Returns (centers, membership, "
        "labels, confidence, objective_history, n_iter, converged, center_shift, weightless_cluster).";
    m.def("fuzzy_cmeans_f64", &fuzzy_cmeans<double>, py::arg("x"), py::arg("n_clusters"), py::arg("m"),
          py::arg("max_iter"), py::arg("tol"), py::arg("init_centers") = py::none(),
          py::arg("init_membership") = py::none(), doc);
    m.def("fuzzy_cmeans_f32", &fuzzy_cmeans<float>, py::arg("x"), py::arg("n_clusters"), py::arg("m"),
          py::arg("max_iter"), py::arg("tol"), py::arg("init_centers") = py::none(),
          py::arg("init_membership") = py::none(), doc);
}

}  // namespace vflsec::bindings
