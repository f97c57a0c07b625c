// Fuzzy c-means (Bezdek 1984) on a dense row-major (n, d) matrix.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace vflsec {

struct FCMStatus {
    int n_iter = 0;
    bool converged = false;
    double objective = 0.0;              // J_m(U, V) at the returned (U, V)
    std::vector<double> objective_history;  // J_m(U_t, V_t) after each iteration t
};

// Runs FCM from an initial membership (start_from_centers == false: U holds
// the (n, c) initial membership) or from initial centres (true: V holds the
// (c, d) initial centres). On return V holds the centres and U the
// membership computed from them.
// labels[i] = argmax_j U[i, j] (first on ties), confidence[i] = max_j U[i, j].
template <typename T>
void hard_assignments(const T* U, std::size_t n, std::size_t c, std::int64_t* labels, T* confidence);

template <typename T>
FCMStatus fuzzy_cmeans(const T* X, std::size_t n, std::size_t d, std::size_t c, double m, int max_iter,
                       double tol, bool start_from_centers, T* V, T* U);

}  // namespace vflsec
