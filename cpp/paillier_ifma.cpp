// AVX-512 IFMA Montgomery arithmetic for the Paillier fixed-base kernel:
// eight independent products per call, one per 64-bit lane, in radix 2^52
// (vpmadd52luq / vpmadd52huq multiply the low 52 bits of two lanes and add
// the low / high 52 bits of the 104-bit product to a 64-bit accumulator).
//
// Only functions with internal linkage carry the target attribute and they use
// no templates from the standard library, so no AVX-512 code can be merged into
// a function that baseline code calls. The two exported entry points check
// nothing: the caller (paillier_fixed_base.cpp) calls them only after
// available() and with buffers of the documented sizes.
#include "paillier_ifma.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define VFLSEC_HAVE_IFMA 1
#include <immintrin.h>
#define VFLSEC_IFMA __attribute__((target("avx512f,avx512ifma")))
#else
#define VFLSEC_HAVE_IFMA 0
#endif

#include <cstdlib>

namespace vflsec::paillier::ifma {

#if VFLSEC_HAVE_IFMA

namespace {

// Digit j of the second operand, from memory (an 8-lane value).
struct FromMemory {
    const __m512i* b;
    VFLSEC_IFMA __m512i operator()(int j) const { return _mm512_load_si512(b + j); }
};

// Digit j of the second operand, gathered from eight table entries: lane l
// reads table[offsets[l] + j].
struct FromTable {
    const long long* table;
    __m512i offsets;
    VFLSEC_IFMA __m512i operator()(int j) const {
        return _mm512_i64gather_epi64(_mm512_add_epi64(offsets, _mm512_set1_epi64(j)), table, 8);
    }
};

// Operand scanning: for each digit b_j, add a b_j and q_j N (q_j chosen so that
// the lowest digit becomes 0 mod 2^52) into a window of the accumulator that
// moves up one digit per step (the division by 2^52). Each accumulator slot
// receives at most 4 L values below 2^52 while it is in the window, so
// L < 1024 keeps it below 2^64 (the caller enforces a far smaller L). `res`
// is written only at the end, so it may alias `a` or the source of b.
template <class GetB>
VFLSEC_IFMA inline void amm(__m512i* res, const __m512i* a, const GetB& get_b, const std::uint64_t* N,
                            std::uint64_t k0, int L, __m512i* acc) {
    const __m512i zero = _mm512_setzero_si512();
    const __m512i k0v = _mm512_set1_epi64(static_cast<long long>(k0));
    const __m512i mask = _mm512_set1_epi64(static_cast<long long>((1ull << 52) - 1));
    for (int i = 0; i <= 2 * L; ++i) _mm512_store_si512(acc + i, zero);
    const __m512i n0 = _mm512_set1_epi64(static_cast<long long>(N[0]));
    for (int j = 0; j < L; ++j) {
        __m512i* w = acc + j;
        const __m512i bj = get_b(j);
        const __m512i a0 = _mm512_load_si512(a);
        __m512i low = _mm512_madd52lo_epu64(_mm512_load_si512(w), a0, bj);
        const __m512i q = _mm512_madd52lo_epu64(zero, low, k0v);
        low = _mm512_madd52lo_epu64(low, n0, q);  // now 0 mod 2^52: carry its top bits up
        __m512i next = _mm512_add_epi64(_mm512_load_si512(w + 1), _mm512_srli_epi64(low, 52));
        next = _mm512_madd52hi_epu64(next, a0, bj);
        next = _mm512_madd52hi_epu64(next, n0, q);
        for (int i = 1; i < L; ++i) {
            const __m512i ai = _mm512_load_si512(a + i);
            const __m512i ni = _mm512_set1_epi64(static_cast<long long>(N[i]));
            next = _mm512_madd52lo_epu64(next, ai, bj);
            next = _mm512_madd52lo_epu64(next, ni, q);
            _mm512_store_si512(w + i, next);
            next = _mm512_madd52hi_epu64(_mm512_load_si512(w + i + 1), ai, bj);
            next = _mm512_madd52hi_epu64(next, ni, q);
        }
        _mm512_store_si512(w + L, next);
    }
    // acc[L, 2L) holds the result with unnormalized digits; the value is < 2N < R.
    __m512i carry = zero;
    for (int i = 0; i < L; ++i) {
        const __m512i d = _mm512_add_epi64(_mm512_load_si512(acc + L + i), carry);
        carry = _mm512_srli_epi64(d, 52);
        _mm512_store_si512(res + i, _mm512_and_si512(d, mask));
    }
}

VFLSEC_IFMA void amm8_impl(std::uint64_t* res, const std::uint64_t* a, const std::uint64_t* b,
                           const std::uint64_t* N, std::uint64_t k0, int L, std::uint64_t* scratch) {
    amm(reinterpret_cast<__m512i*>(res), reinterpret_cast<const __m512i*>(a),
        FromMemory{reinterpret_cast<const __m512i*>(b)}, N, k0, L, reinterpret_cast<__m512i*>(scratch));
}

VFLSEC_IFMA void comb8_impl(std::uint64_t* acc, const std::uint64_t* table, const std::uint64_t* offsets, int rows,
                            const std::uint64_t* N, std::uint64_t k0, int L, std::uint64_t* scratch) {
    __m512i* x = reinterpret_cast<__m512i*>(acc);
    const long long* t = reinterpret_cast<const long long*>(table);
    FromTable first{t, _mm512_loadu_si512(offsets)};
    for (int j = 0; j < L; ++j) _mm512_store_si512(x + j, first(j));
    // The next row's eight entries are fetched into L1 during this row's product
    // (entries are L words, not line-aligned: one line more than L words span).
    const int lines = (L * 8 + 63) / 64;
    for (int r = 1; r < rows; ++r) {
        if (r + 1 < rows)
            for (int l = 0; l < 8; ++l) {
                const char* entry = reinterpret_cast<const char*>(table + offsets[8 * (r + 1) + l]);
                for (int c = 0; c <= lines; ++c) _mm_prefetch(entry + 64 * c, _MM_HINT_T0);
            }
        FromTable row{t, _mm512_loadu_si512(offsets + 8 * r)};
        amm(x, x, row, N, k0, L, reinterpret_cast<__m512i*>(scratch));
    }
}

}  // namespace

bool available() {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512ifma");
}

void amm8(std::uint64_t* res, const std::uint64_t* a, const std::uint64_t* b, const std::uint64_t* N,
          std::uint64_t k0, int L, std::uint64_t* scratch) {
    amm8_impl(res, a, b, N, k0, L, scratch);
}

void comb8(std::uint64_t* acc, const std::uint64_t* table, const std::uint64_t* offsets, int rows,
           const std::uint64_t* N, std::uint64_t k0, int L, std::uint64_t* scratch) {
    comb8_impl(acc, table, offsets, rows, N, k0, L, scratch);
}

#else  // no x86-64 IFMA target in this build

bool available() { return false; }

void amm8(std::uint64_t*, const std::uint64_t*, const std::uint64_t*, const std::uint64_t*, std::uint64_t, int,
          std::uint64_t*) {
    std::abort();  // unreachable: callers check available() first
}

void comb8(std::uint64_t*, const std::uint64_t*, const std::uint64_t*, int, const std::uint64_t*, std::uint64_t, int,
           std::uint64_t*) {
    std::abort();
}

#endif

}  // namespace vflsec::paillier::ifma
