#include <pybind11/pybind11.h>
namespace py = pybind11;
namespace vflsec::bindings {
void bind_distances(py::module_& m) { (void)m; }  // placeholder until the kernel lands
}  // namespace vflsec::bindings
