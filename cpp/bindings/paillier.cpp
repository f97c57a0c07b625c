// Binding for the Paillier fixed-base kernel (cpp/paillier_fixed_base.hpp).
// python/vflsec/he/_paillier_math.py converts integers to and from the fixed
// length little-endian byte strings and draws the exponents; the checks here
// (byte lengths, and in the C++ core the ranges of every value) keep a direct
// call into _core from reading out of bounds or computing garbage: a bad
// argument raises ValueError. Work runs with the GIL released.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <stdexcept>
#include <string>

#include "paillier_fixed_base.hpp"
#include "paillier_histogram.hpp"

namespace py = pybind11;

namespace vflsec::bindings {
namespace {

using paillier::FixedBaseTable;

// A contiguous byte buffer (bytes, bytearray, memoryview); the view keeps it alive and unresizable.
struct Bytes {
    py::buffer_info info;
    const std::uint8_t* data() const { return static_cast<const std::uint8_t*>(info.ptr); }
    std::size_t size() const { return static_cast<std::size_t>(info.size); }
};

Bytes byte_buffer(const py::buffer& b, const char* what) {
    Bytes out{b.request()};
    if (out.info.ndim != 1 || out.info.itemsize != 1 || (out.info.size > 1 && out.info.strides[0] != 1))
        throw std::invalid_argument(std::string(what) + " must be a contiguous byte string");
    return out;
}

std::size_t items(const Bytes& b, std::size_t item_bytes, const char* what) {
    if (b.size() % item_bytes != 0)
        throw std::invalid_argument(std::string(what) + " has " + std::to_string(b.size()) +
                                    " bytes, not a multiple of " + std::to_string(item_bytes));
    return b.size() / item_bytes;
}

py::bytes new_bytes(std::size_t size, std::uint8_t** data) {
    PyObject* obj = PyBytes_FromStringAndSize(nullptr, static_cast<Py_ssize_t>(size));
    if (obj == nullptr) throw py::error_already_set();
    *data = reinterpret_cast<std::uint8_t*>(PyBytes_AS_STRING(obj));
    return py::reinterpret_steal<py::bytes>(obj);
}

std::unique_ptr<FixedBaseTable> make_table(const py::buffer& n, const py::buffer& hs, int exponent_bits,
                                           int window) {
    const Bytes nb = byte_buffer(n, "n"), hb = byte_buffer(hs, "hs");
    py::gil_scoped_release release;
    return std::make_unique<FixedBaseTable>(nb.data(), nb.size(), hb.data(), hb.size(), exponent_bits, window);
}

py::bytes powers(const FixedBaseTable& t, const py::buffer& alphas) {
    const Bytes a = byte_buffer(alphas, "alphas");
    const std::size_t count = items(a, t.exponent_bytes(), "alphas");
    std::uint8_t* out = nullptr;
    py::bytes result = new_bytes(count * t.ciphertext_bytes(), &out);
    {
        py::gil_scoped_release release;
        t.powers(a.data(), count, out);
    }
    return result;
}

py::bytes apply(const FixedBaseTable& t, const py::buffer& values, const py::buffer& alphas, bool encrypt) {
    const char* what = encrypt ? "plaintexts" : "ciphertexts";
    const Bytes v = byte_buffer(values, what), a = byte_buffer(alphas, "alphas");
    const std::size_t count = items(v, encrypt ? t.plaintext_bytes() : t.ciphertext_bytes(), what);
    if (items(a, t.exponent_bytes(), "alphas") != count)
        throw std::invalid_argument(std::string("alphas must hold one exponent per entry of ") + what);
    std::uint8_t* out = nullptr;
    py::bytes result = new_bytes(count * t.ciphertext_bytes(), &out);
    {
        py::gil_scoped_release release;
        if (encrypt)
            t.encrypt(v.data(), a.data(), count, out);
        else
            t.rerandomize(v.data(), a.data(), count, out);
    }
    return result;
}

using paillier::CiphertextRows;
using Int64s = py::array_t<std::int64_t, py::array::c_style>;
using Codes = py::array_t<std::uint8_t, py::array::c_style>;

std::unique_ptr<CiphertextRows> make_rows(const py::buffer& n, const py::buffer& ciphertexts) {
    const Bytes nb = byte_buffer(n, "n"), cb = byte_buffer(ciphertexts, "ciphertexts");
    py::gil_scoped_release release;
    return std::make_unique<CiphertextRows>(nb.data(), nb.size(), cb.data(), cb.size());
}

py::bytes histogram(const CiphertextRows& t, const Int64s& rows, const Codes& codes, const Int64s& offsets,
                    std::size_t bins) {
    if (rows.ndim() != 1 || offsets.ndim() != 1 || codes.ndim() != 2)
        throw std::invalid_argument("rows and offsets must be 1-D, codes 2-D");
    if (static_cast<std::size_t>(codes.shape(0)) != t.count())
        throw std::invalid_argument("codes must have one row per ciphertext");
    if (codes.shape(1) != offsets.shape(0)) throw std::invalid_argument("offsets must have one entry per feature");
    if (bins == 0) throw std::invalid_argument("bins must be positive");
    std::uint8_t* out = nullptr;
    py::bytes result = new_bytes(bins * t.ciphertext_bytes(), &out);
    {
        py::gil_scoped_release release;
        t.histogram(rows.data(), static_cast<std::size_t>(rows.shape(0)), codes.data(),
                    static_cast<std::size_t>(codes.shape(1)), offsets.data(), bins, out);
    }
    return result;
}

py::bytes pack(const CiphertextRows& t, const py::buffer& ciphertexts, int slots, int width) {
    const Bytes c = byte_buffer(ciphertexts, "ciphertexts");
    const std::size_t count = items(c, t.ciphertext_bytes(), "ciphertexts");
    if (slots < 1) throw std::invalid_argument("slots must be positive");
    const std::size_t groups = (count + static_cast<std::size_t>(slots) - 1) / static_cast<std::size_t>(slots);
    std::uint8_t* out = nullptr;
    py::bytes result = new_bytes(groups * t.ciphertext_bytes(), &out);
    {
        py::gil_scoped_release release;
        t.pack(c.data(), count, slots, width, out);
    }
    return result;
}

}  // namespace

void bind_paillier(py::module_& m) {
    m.def("paillier_native_available", &paillier::fixed_base_available,
          "True when the native Paillier fixed-base kernel runs here (x86-64 CPU with AVX-512F and AVX-512 IFMA).");
    py::class_<FixedBaseTable>(m, "PaillierFixedBase",
                               "DJN fixed-base table of one Paillier key (private: use vflsec.he). Integers are "
                               "little-endian byte strings: n and plaintexts of plaintext_bytes, hs, ciphertexts "
                               "and results of ciphertext_bytes, exponents of exponent_bytes.")
        .def(py::init(&make_table), py::arg("n"), py::arg("hs"), py::arg("exponent_bits"), py::arg("window"))
        .def_property_readonly("modulus_bits", &FixedBaseTable::modulus_bits)
        .def_property_readonly("exponent_bits", &FixedBaseTable::exponent_bits)
        .def_property_readonly("window", &FixedBaseTable::window)
        .def_property_readonly("rows", &FixedBaseTable::rows)
        .def_property_readonly("entries", &FixedBaseTable::entries)
        .def_property_readonly("table_bytes", &FixedBaseTable::table_bytes)
        .def_property_readonly("plaintext_bytes", &FixedBaseTable::plaintext_bytes)
        .def_property_readonly("ciphertext_bytes", &FixedBaseTable::ciphertext_bytes)
        .def_property_readonly("exponent_bytes", &FixedBaseTable::exponent_bytes)
        .def("powers", &powers, py::arg("alphas"), "hs^alpha mod n^2 for each exponent.")
        .def(
            "encrypt",
            [](const FixedBaseTable& t, const py::buffer& m, const py::buffer& a) { return apply(t, m, a, true); },
            py::arg("plaintexts"), py::arg("alphas"), "(1 + n m) hs^alpha mod n^2 for each plaintext m < n.")
        .def(
            "rerandomize",
            [](const FixedBaseTable& t, const py::buffer& c, const py::buffer& a) { return apply(t, c, a, false); },
            py::arg("ciphertexts"), py::arg("alphas"), "c hs^alpha mod n^2 for each ciphertext c < n^2.");
    py::class_<CiphertextRows>(m, "PaillierCiphertextRows",
                               "A round's ciphertexts (one per row) in Montgomery form, for SecureBoost's "
                               "histograms (private: use vflsec.trees). n and ciphertexts are little-endian byte "
                               "strings; ciphertexts of ceil(2 bits / 8) bytes each.")
        .def(py::init(&make_rows), py::arg("n"), py::arg("ciphertexts"))
        .def_property_readonly("count", &CiphertextRows::count)
        .def_property_readonly("ciphertext_bytes", &CiphertextRows::ciphertext_bytes)
        .def("histogram", &histogram, py::arg("rows"), py::arg("codes"), py::arg("offsets"), py::arg("bins"),
             "Each bin's product mod n^2 of the ciphertexts of `rows` in it (bins x ciphertext_bytes bytes, "
             "little-endian; an empty bin is 1).")
        .def("pack", &pack, py::arg("ciphertexts"), py::arg("slots"), py::arg("width"),
             "Groups of `slots` ciphertexts, each as prod_i c_i^(2^(width i)) mod n^2 (little-endian bytes).");
}

}  // namespace vflsec::bindings
