// Fuzzy c-means (Bezdek 1984) over row-major float32/float64 data.
//
// Iteration p = 1, 2, ... (V_0 = initial centres when given, U_0 = initial
// memberships otherwise; with initial centres U_0 = U(V_0)):
//   V_p = sum_i u_ij^m x_i / sum_i u_ij^m      computed from U_{p-1}
//   U_p = U(V_p): u_ij = 1 / sum_k (d_ij / d_ik)^(2/(m-1))
//   J_p = J_m(U_p, V_p) = sum_i sum_j u_ij^m ||x_i - v_j||^2
//   shift_p = max_j ||v_j^(p) - v_j^(p-1)||  (undefined, never converged, at p = 1
//             when only memberships were given)
// stopping after the first p with shift_p < tol, or at p = max_iter. The
// returned pair is (V_p, U_p), so centres, memberships and the objective always
// belong together. J_p is non-increasing in exact arithmetic:
// J(U_p, V_p) >= J(U_p, V_{p+1}) >= J(U_{p+1}, V_{p+1}).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vflsec::fcm {

struct Options {
    double m = 2.0;
    int max_iter = 300;
    double tol = 1e-5;
};

struct Outcome {
    std::vector<double> objective_history;  // J_p for p = 1..n_iter
    int n_iter = 0;
    bool converged = false;
    double center_shift = 0.0;  // shift_{n_iter}; +inf when undefined
    // >= 0: the initial memberships give this cluster zero total weight
    // (sum_i u_ij^m == 0), so its first centre is undefined; nothing was computed.
    std::ptrdiff_t weightless_cluster = -1;
};

// Exactly one of init_centers (c x d) and init_membership (n x c) is non-null.
// Outputs: centers (c x d), membership (n x c), labels (n, argmax of each
// membership row, first on ties) and confidence (n, the row maximum).
// Requirements (checked by the caller): n >= c >= 2, d >= 1, all data finite,
// squared distances representable in T, m > 1, tol > 0, max_iter >= 1,
// initial memberships nonnegative with rows summing to 1.
template <typename T>
Outcome fuzzy_cmeans(const T* x, std::size_t n, std::size_t d, std::size_t c, const Options& options,
                     const T* init_centers, const T* init_membership, T* centers, T* membership,
                     std::int64_t* labels, T* confidence);

// The ISA path of the fused pass is isa::fcm_family()'s (isa_dispatch.hpp):
// "default", "avx2" or "avx512f".

extern template Outcome fuzzy_cmeans<float>(const float*, std::size_t, std::size_t, std::size_t, const Options&,
                                            const float*, const float*, float*, float*, std::int64_t*, float*);
extern template Outcome fuzzy_cmeans<double>(const double*, std::size_t, std::size_t, std::size_t, const Options&,
                                             const double*, const double*, double*, double*, std::int64_t*, double*);

}  // namespace vflsec::fcm
