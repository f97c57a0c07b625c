// Bindings for the secure noise generator. python/vflsec/kernels/noise.py
// validates every argument and allocates every output; out arrays are taken
// with noconvert so a mismatched array is refused instead of silently copied.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "chacha20.hpp"
#include "discrete_gaussian.hpp"
#include "lattice_gaussian.hpp"
#include "noise.hpp"

namespace py = pybind11;

namespace vflsec::bindings {

namespace {

using noise::ChaCha20Generator;
template <typename T>
using CArray = py::array_t<T, py::array::c_style>;

const uint8_t* bytes_data(const py::bytes& b, size_t expected, const char* what) {
    char* data = nullptr;
    Py_ssize_t len = 0;
    if (PyBytes_AsStringAndSize(b.ptr(), &data, &len) != 0) throw py::error_already_set();
    if (static_cast<size_t>(len) != expected)
        throw std::invalid_argument(std::string(what) + " must be " + std::to_string(expected) + " bytes");
    return reinterpret_cast<const uint8_t*>(data);
}

// RFC 8439 interface: 32-bit block counter, 96-bit nonce (state words 12..15).
py::bytes chacha20_block(const py::bytes& key, uint32_t counter, const py::bytes& nonce) {
    const chacha20::Key k = chacha20::key_from_bytes(bytes_data(key, 32, "key"));
    const uint8_t* nb = bytes_data(nonce, 12, "nonce");
    const uint32_t w12_15[4] = {counter, chacha20::load_le32(nb), chacha20::load_le32(nb + 4),
                                chacha20::load_le32(nb + 8)};
    uint32_t out[16];
    chacha20::block_reference(k, w12_15, out);
    uint8_t bytes[64];
    for (int i = 0; i < 16; ++i)
        for (int b = 0; b < 4; ++b) bytes[4 * i + b] = static_cast<uint8_t>(out[i] >> (8 * b));
    return py::bytes(reinterpret_cast<const char*>(bytes), sizeof bytes);
}

}  // namespace

void bind_noise(py::module_& m) {
    py::class_<ChaCha20Generator> gen(m, "ChaCha20Generator",
                                  "Counter-mode ChaCha20 stream (private: use vflsec.NoiseGenerator)");
    gen.def(py::init<>(), "Secure: keyed with 32 bytes from getrandom(2).")
        .def_static(
            "from_key",
            [](const py::bytes& key, uint64_t first_block) {
                return std::make_unique<ChaCha20Generator>(bytes_data(key, 32, "key"), first_block);
            },
            py::arg("key"), py::arg("first_block") = 0,
            "Deterministic stream under a caller-derived 32-byte key, starting at block first_block.")
        .def_property_readonly("is_secure", &ChaCha20Generator::is_secure)
        .def_property_readonly("blocks_used", &ChaCha20Generator::blocks_used)
        .def(
            "fill_normal",
            [](ChaCha20Generator& g, CArray<double> out, double sigma) {
                double* p = out.mutable_data();
                const size_t n = static_cast<size_t>(out.size());
                py::gil_scoped_release release;
                noise::fill_normal_f64(g, p, n, sigma);
            },
            py::arg("out").noconvert(), py::arg("sigma"))
        .def(
            "fill_normal",
            [](ChaCha20Generator& g, CArray<float> out, double sigma) {
                float* p = out.mutable_data();
                const size_t n = static_cast<size_t>(out.size());
                py::gil_scoped_release release;
                noise::fill_normal_f32(g, p, n, sigma);
            },
            py::arg("out").noconvert(), py::arg("sigma"))
        .def(
            "add_normal",
            [](ChaCha20Generator& g, CArray<double> x, CArray<double> out, double sigma) {
                if (x.size() != out.size()) throw std::invalid_argument("x and out differ in size");
                const double* xp = x.data();
                double* p = out.mutable_data();
                const size_t n = static_cast<size_t>(out.size());
                py::gil_scoped_release release;
                return noise::add_normal_f64(g, xp, p, n, sigma);
            },
            py::arg("x").noconvert(), py::arg("out").noconvert(), py::arg("sigma"))
        .def(
            "add_normal",
            [](ChaCha20Generator& g, CArray<float> x, CArray<float> out, double sigma) {
                if (x.size() != out.size()) throw std::invalid_argument("x and out differ in size");
                const float* xp = x.data();
                float* p = out.mutable_data();
                const size_t n = static_cast<size_t>(out.size());
                py::gil_scoped_release release;
                return noise::add_normal_f32(g, xp, p, n, sigma);
            },
            py::arg("x").noconvert(), py::arg("out").noconvert(), py::arg("sigma"))
        .def(
            "fill_raw",
            [](ChaCha20Generator& g, CArray<uint64_t> out) {
                uint64_t* p = out.mutable_data();
                const size_t n = static_cast<size_t>(out.size());
                py::gil_scoped_release release;
                noise::fill_raw(g, p, n);
            },
            py::arg("out").noconvert())
        .def(
            "fill_discrete_gaussian",
            [](ChaCha20Generator& g, CArray<int64_t> out, std::vector<uint64_t> a, std::vector<uint64_t> bt,
               std::vector<uint64_t> den, uint64_t t, size_t samples_per_chunk, uint64_t blocks_per_chunk) {
                if (a.size() != bt.size() || a.size() != den.size())
                    throw std::invalid_argument("a, bt and den must have the same number of limbs");
                int64_t* p = out.mutable_data();
                const size_t n = static_cast<size_t>(out.size());
                const noise::DiscreteGaussianParams params{a.data(), bt.data(), den.data(), a.size(), t};
                py::gil_scoped_release release;
                noise::fill_discrete_gaussian(g, p, n, params, samples_per_chunk, blocks_per_chunk);
            },
            py::arg("out").noconvert(), py::arg("a"), py::arg("bt"), py::arg("den"), py::arg("t"),
            py::arg("samples_per_chunk") = noise::kDgSamplesPerChunk,
            py::arg("blocks_per_chunk") = noise::kDgBlocksPerChunk,
            "Exact discrete Gaussian samples into out (int64); parameters as little-endian uint64 limbs "
            "(see cpp/discrete_gaussian.hpp).");

    py::class_<noise::LatticeGaussianTable>(
        m, "LatticeGaussianTable", "Sampling tables of the rounded Gaussian round(s N(0, 1)), s in [2^20, 2^21)")
        .def(py::init<double>(), py::arg("scale"))
        .def_property_readonly("scale", &noise::LatticeGaussianTable::scale)
        .def_property_readonly("support", &noise::LatticeGaussianTable::support);
    gen.def(
           "add_lattice_gaussian",
           [](ChaCha20Generator& g, const noise::LatticeGaussianTable& t, CArray<double> x, CArray<double> out,
              int e) {
               if (x.size() != out.size()) throw std::invalid_argument("x and out differ in size");
               const double* xp = x.data();
               double* p = out.mutable_data();
               const size_t n = static_cast<size_t>(out.size());
               py::gil_scoped_release release;
               return noise::add_lattice_gaussian_f64(g, t, xp, p, n, e);
           },
           py::arg("table"), py::arg("x").noconvert(), py::arg("out").noconvert(), py::arg("e"))
        .def(
            "add_lattice_gaussian",
            [](ChaCha20Generator& g, const noise::LatticeGaussianTable& t, CArray<float> x, CArray<float> out,
               int e) {
                if (x.size() != out.size()) throw std::invalid_argument("x and out differ in size");
                const float* xp = x.data();
                float* p = out.mutable_data();
                const size_t n = static_cast<size_t>(out.size());
                py::gil_scoped_release release;
                return noise::add_lattice_gaussian_f32(g, t, xp, p, n, e);
            },
            py::arg("table"), py::arg("x").noconvert(), py::arg("out").noconvert(), py::arg("e"))
        .def(
            "fill_lattice_gaussian",
            [](ChaCha20Generator& g, const noise::LatticeGaussianTable& t, CArray<int64_t> out) {
                int64_t* p = out.mutable_data();
                const size_t n = static_cast<size_t>(out.size());
                py::gil_scoped_release release;
                noise::fill_lattice_gaussian(g, t, p, n);
            },
            py::arg("table"), py::arg("out").noconvert());

    m.def("chacha20_block", &chacha20_block, py::arg("key"), py::arg("counter"), py::arg("nonce"),
          "One RFC 8439 ChaCha20 block (64 bytes) from a 32-byte key, 32-bit counter and 12-byte nonce.");
    m.def(
        "_noise_log",
        [](CArray<double> u) {
            CArray<double> out(u.size());
            noise::log_unit_interval(u.data(), out.mutable_data(), static_cast<size_t>(u.size()));
            return out;
        },
        py::arg("u").noconvert(), "Test hook: the polynomial natural log used by the normal transform.");
    m.def(
        "_noise_sincos",
        [](CArray<double> x) {
            CArray<double> s(x.size()), c(x.size());
            noise::sincos_quarter(x.data(), s.mutable_data(), c.mutable_data(), static_cast<size_t>(x.size()));
            return py::make_tuple(s, c);
        },
        py::arg("x").noconvert(), "Test hook: the polynomial sin and cos on [-pi/4, pi/4].");
}

}  // namespace vflsec::bindings
