// Fuzzy c-means. One pass over the data per iteration, parallel over points:
// each point's squared distances to the current centres give its membership,
// and the same pass accumulates that membership's u^m-weighted sums for the
// next centres. Per-thread partial sums are combined in thread order, so
// results are deterministic for a fixed thread count. Sums are accumulated in
// double whatever the input precision.
#include "fcm.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace vflsec {
namespace {

// Membership of one point from its squared distances: u_j = w_j / sum_k w_k with
// w_j = (dmin / d_j)^(1/(m-1)), which is in (0, 1] so nothing overflows. A point
// on a centre (d_j == 0) gets membership 1 there, split evenly over ties.
// Writes u (working precision) and um = u^m (double, for the centre sums);
// returns sum_j u_j^m d_j, the point's share of the objective.
template <typename T>
__attribute__((always_inline)) inline double membership_row(const double* dist2, std::size_t c, double m,
                                                            double inv_m1, T* u, double* um) {
    double dmin = dist2[0];
    for (std::size_t j = 1; j < c; ++j) dmin = std::min(dmin, dist2[j]);
    double total = 0.0;
    if (dmin == 0.0) {
        for (std::size_t j = 0; j < c; ++j) total += (um[j] = dist2[j] == 0.0 ? 1.0 : 0.0);
    } else if (inv_m1 == 1.0) {
        for (std::size_t j = 0; j < c; ++j) total += (um[j] = dmin / dist2[j]);
    } else {
        for (std::size_t j = 0; j < c; ++j) total += (um[j] = std::pow(dmin / dist2[j], inv_m1));
    }
    double obj = 0.0;
    for (std::size_t j = 0; j < c; ++j) {
        const double uj = um[j] / total;
        u[j] = static_cast<T>(uj);
        const double ur = static_cast<double>(u[j]);  // the centres use the stored membership
        um[j] = m == 2.0 ? ur * ur : std::pow(ur, m);
        obj += um[j] * dist2[j];
    }
    return obj;
}

template <typename T>
__attribute__((always_inline)) inline void add_weighted_row(const T* x, std::size_t d, std::size_t c,
                                                            const double* um, double* num, double* den) {
    for (std::size_t j = 0; j < c; ++j) {
        const double w = um[j];
        if (w == 0.0) continue;
        den[j] += w;
        double* row = num + j * d;
#pragma omp simd
        for (std::size_t k = 0; k < d; ++k) row[k] += w * static_cast<double>(x[k]);
    }
}

// Vt holds the centres transposed and padded to cp columns (a multiple of 8),
// so the distance loop runs across clusters in full SIMD vectors.
template <typename T>
__attribute__((always_inline)) inline double assign_rows_impl(const T* X, std::size_t begin, std::size_t end,
                                                              std::size_t d, std::size_t c, std::size_t cp, double m,
                                                              double inv_m1, const double* Vt, T* U, double* num,
                                                              double* den) {
    std::vector<double> buf(2 * cp);
    double* dp = buf.data();
    double* um = dp + cp;
    double obj = 0.0;
    for (std::size_t i = begin; i < end; ++i) {
        const T* x = X + i * d;
#pragma omp simd
        for (std::size_t j = 0; j < cp; ++j) dp[j] = 0.0;
        for (std::size_t k = 0; k < d; ++k) {
            const double xk = static_cast<double>(x[k]);
            const double* vk = Vt + k * cp;
#pragma omp simd
            for (std::size_t j = 0; j < cp; ++j) {
                const double diff = xk - vk[j];
                dp[j] += diff * diff;
            }
        }
        obj += membership_row(dp, c, m, inv_m1, U + i * c, um);
        add_weighted_row(x, d, c, um, num, den);
    }
    return obj;
}

template <typename T>
__attribute__((always_inline)) inline void accumulate_rows_impl(const T* X, std::size_t begin, std::size_t end,
                                                                std::size_t d, std::size_t c, double m, const T* U,
                                                                double* num, double* den) {
    std::vector<double> um(c);
    for (std::size_t i = begin; i < end; ++i) {
        for (std::size_t j = 0; j < c; ++j) {
            const double u = static_cast<double>(U[i * c + j]);
            um[j] = m == 2.0 ? u * u : std::pow(u, m);
        }
        add_weighted_row(X + i * d, d, c, um.data(), num, den);
    }
}

// GCC clones only non-template functions: one per precision, each compiled
// for AVX-512, AVX2 and baseline x86-64 and picked at load time.
#define VFLSEC_FCM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
VFLSEC_FCM_CLONES double assign_rows_f64(const double* X, std::size_t b, std::size_t e, std::size_t d, std::size_t c,
                                         std::size_t cp, double m, double inv_m1, const double* Vt, double* U,
                                         double* num, double* den) {
    return assign_rows_impl<double>(X, b, e, d, c, cp, m, inv_m1, Vt, U, num, den);
}
VFLSEC_FCM_CLONES double assign_rows_f32(const float* X, std::size_t b, std::size_t e, std::size_t d, std::size_t c,
                                         std::size_t cp, double m, double inv_m1, const double* Vt, float* U,
                                         double* num, double* den) {
    return assign_rows_impl<float>(X, b, e, d, c, cp, m, inv_m1, Vt, U, num, den);
}
VFLSEC_FCM_CLONES void accumulate_rows_f64(const double* X, std::size_t b, std::size_t e, std::size_t d,
                                           std::size_t c, double m, const double* U, double* num, double* den) {
    accumulate_rows_impl<double>(X, b, e, d, c, m, U, num, den);
}
VFLSEC_FCM_CLONES void accumulate_rows_f32(const float* X, std::size_t b, std::size_t e, std::size_t d,
                                           std::size_t c, double m, const float* U, double* num, double* den) {
    accumulate_rows_impl<float>(X, b, e, d, c, m, U, num, den);
}
inline double assign_rows(const double* X, std::size_t b, std::size_t e, std::size_t d, std::size_t c, std::size_t cp,
                          double m, double inv_m1, const double* Vt, double* U, double* num, double* den) {
    return assign_rows_f64(X, b, e, d, c, cp, m, inv_m1, Vt, U, num, den);
}
inline double assign_rows(const float* X, std::size_t b, std::size_t e, std::size_t d, std::size_t c, std::size_t cp,
                          double m, double inv_m1, const double* Vt, float* U, double* num, double* den) {
    return assign_rows_f32(X, b, e, d, c, cp, m, inv_m1, Vt, U, num, den);
}
inline void accumulate_rows(const double* X, std::size_t b, std::size_t e, std::size_t d, std::size_t c, double m,
                            const double* U, double* num, double* den) {
    accumulate_rows_f64(X, b, e, d, c, m, U, num, den);
}
inline void accumulate_rows(const float* X, std::size_t b, std::size_t e, std::size_t d, std::size_t c, double m,
                            const float* U, double* num, double* den) {
    accumulate_rows_f32(X, b, e, d, c, m, U, num, den);
}

// The thread count fixes the partition, so every thread's partial is combined
// in the same order on every run.
inline void chunk(std::size_t n, int t, int nt, std::size_t& b, std::size_t& e) {
    b = n * static_cast<std::size_t>(t) / static_cast<std::size_t>(nt);
    e = n * static_cast<std::size_t>(t + 1) / static_cast<std::size_t>(nt);
}

}  // namespace

template <typename T>
FCMStatus fuzzy_cmeans(const T* X, std::size_t n, std::size_t d, std::size_t c, double m, int max_iter,
                       double tol, bool start_from_centers, T* V_out, T* U) {
    FCMStatus st;
    const double inv_m1 = 1.0 / (m - 1.0);
    const int nt = std::max(1, std::min<int>(omp_get_max_threads(), static_cast<int>(n)));
    const std::size_t cp = (c + 7) / 8 * 8;
    std::vector<double> V(c * d), V_prev(c * d), Vt(d * cp, 0.0);
    std::vector<double> num(static_cast<std::size_t>(nt) * c * d), den(static_cast<std::size_t>(nt) * c);
    std::vector<double> partial_obj(nt);

    // Memberships from V, and the u^m-weighted sums of those memberships.
    auto assign = [&]() {
        for (std::size_t j = 0; j < c; ++j)
            for (std::size_t k = 0; k < d; ++k) Vt[k * cp + j] = V[j * d + k];
        std::fill(num.begin(), num.end(), 0.0);
        std::fill(den.begin(), den.end(), 0.0);
#pragma omp parallel num_threads(nt)
        {
            const int t = omp_get_thread_num();
            std::size_t b, e;
            chunk(n, t, nt, b, e);
            partial_obj[t] = assign_rows(X, b, e, d, c, cp, m, inv_m1, Vt.data(), U,
                                         num.data() + static_cast<std::size_t>(t) * c * d,
                                         den.data() + static_cast<std::size_t>(t) * c);
        }
        double obj = 0.0;
        for (int t = 0; t < nt; ++t) obj += partial_obj[t];
        return obj;
    };

    bool have_prev = false;
    if (start_from_centers) {
        for (std::size_t i = 0; i < c * d; ++i) V[i] = static_cast<double>(V_out[i]);
        assign();
        V_prev = V;
        have_prev = true;
    } else {
#pragma omp parallel num_threads(nt)
        {
            const int t = omp_get_thread_num();
            std::size_t b, e;
            chunk(n, t, nt, b, e);
            accumulate_rows(X, b, e, d, c, m, U, num.data() + static_cast<std::size_t>(t) * c * d,
                            den.data() + static_cast<std::size_t>(t) * c);
        }
    }
    for (int it = 1; it <= max_iter; ++it) {
        for (std::size_t j = 0; j < c; ++j) {
            double dsum = 0.0;
            for (int t = 0; t < nt; ++t) dsum += den[static_cast<std::size_t>(t) * c + j];
            for (std::size_t k = 0; k < d; ++k) {
                double nsum = 0.0;
                for (int t = 0; t < nt; ++t) nsum += num[(static_cast<std::size_t>(t) * c + j) * d + k];
                // A cluster with no weight keeps its previous centre (only possible
                // when every membership of it underflowed to zero).
                V[j * d + k] = dsum > 0.0 ? nsum / dsum : (have_prev ? V_prev[j * d + k] : 0.0);
            }
        }
        // Round the centres to the working precision before using them, so
        // float32 runs use exactly the centres they return.
        for (std::size_t i = 0; i < c * d; ++i) V[i] = static_cast<double>(static_cast<T>(V[i]));
        st.objective = assign();
        st.objective_history.push_back(st.objective);
        st.n_iter = it;
        if (have_prev) {
            double shift = 0.0;
            for (std::size_t j = 0; j < c; ++j) {
                double s = 0.0;
                for (std::size_t k = 0; k < d; ++k) {
                    const double diff = V[j * d + k] - V_prev[j * d + k];
                    s += diff * diff;
                }
                shift = std::max(shift, std::sqrt(s));
            }
            if (shift < tol) {
                st.converged = true;
                break;
            }
        }
        V_prev = V;
        have_prev = true;
    }
    for (std::size_t i = 0; i < c * d; ++i) V_out[i] = static_cast<T>(V[i]);
    return st;
}

template FCMStatus fuzzy_cmeans<float>(const float*, std::size_t, std::size_t, std::size_t, double, int, double, bool,
                                       float*, float*);
template FCMStatus fuzzy_cmeans<double>(const double*, std::size_t, std::size_t, std::size_t, double, int, double,
                                        bool, double*, double*);

}  // namespace vflsec
