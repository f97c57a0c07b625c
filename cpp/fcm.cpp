// Fuzzy c-means. Each iteration is two passes over the data, both parallel over
// points: (1) centres from u^m-weighted sums, with per-thread partial sums
// combined in thread order so results are deterministic for a fixed thread
// count; (2) squared distances to the centres and the membership update.
// Sums are accumulated in double whatever the input precision.
#include "fcm.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace vflsec {
namespace {

// Membership of one point from its squared distances: u_j = w_j / sum_k w_k with
// w_j = (dmin / d_j)^(1/(m-1)), which is in (0, 1] so nothing overflows. A point
// on a centre (d_j == 0) gets membership 1 there, split evenly over ties.
// Returns sum_j u_j^m d_j, the point's share of the objective.
template <typename T>
__attribute__((always_inline)) inline double membership_row(const double* dist2, std::size_t c, double m, double inv_m1, T* u) {
    double dmin = dist2[0];
    for (std::size_t j = 1; j < c; ++j) dmin = std::min(dmin, dist2[j]);
    double w[64];
    std::vector<double> heap(c > 64 ? c : 0);
    double* wp = c <= 64 ? w : heap.data();
    double total = 0.0;
    if (dmin == 0.0) {
        for (std::size_t j = 0; j < c; ++j) {
            wp[j] = dist2[j] == 0.0 ? 1.0 : 0.0;
            total += wp[j];
        }
    } else if (inv_m1 == 1.0) {
        for (std::size_t j = 0; j < c; ++j) {
            wp[j] = dmin / dist2[j];
            total += wp[j];
        }
    } else {
        for (std::size_t j = 0; j < c; ++j) {
            wp[j] = std::pow(dmin / dist2[j], inv_m1);
            total += wp[j];
        }
    }
    double obj = 0.0;
    for (std::size_t j = 0; j < c; ++j) {
        const double uj = wp[j] / total;
        u[j] = static_cast<T>(uj);
        const double um = m == 2.0 ? uj * uj : std::pow(uj, m);
        obj += um * dist2[j];
    }
    return obj;
}

// Vt holds the centres transposed and padded to cp columns (a multiple of 8),
// so the distance loop runs across clusters in full SIMD vectors.
template <typename T>
__attribute__((always_inline)) inline double assign_rows_impl(const T* X, std::size_t begin, std::size_t end, std::size_t d, std::size_t c, std::size_t cp,
                   double m, double inv_m1, const double* Vt, T* U) {
    std::vector<double> dist2(cp);
    double* dp = dist2.data();
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
        obj += membership_row(dp, c, m, inv_m1, U + i * c);
    }
    return obj;
}

template <typename T>
__attribute__((always_inline)) inline void accumulate_centers_impl(const T* X, std::size_t begin, std::size_t end, std::size_t d, std::size_t c, double m,
                        const T* U, double* num, double* den) {
    for (std::size_t i = begin; i < end; ++i) {
        const T* x = X + i * d;
        for (std::size_t j = 0; j < c; ++j) {
            const double u = static_cast<double>(U[i * c + j]);
            const double um = m == 2.0 ? u * u : std::pow(u, m);
            if (um == 0.0) continue;
            den[j] += um;
            double* row = num + j * d;
#pragma omp simd
            for (std::size_t k = 0; k < d; ++k) row[k] += um * static_cast<double>(x[k]);
        }
    }
}

// GCC clones only non-template functions: one per precision, each compiled
// for AVX-512, AVX2 and baseline x86-64 and picked at load time.
#define VFLSEC_FCM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
VFLSEC_FCM_CLONES double assign_rows_f64(const double* X, std::size_t b, std::size_t e, std::size_t d, std::size_t c,
                                         std::size_t cp, double m, double inv_m1, const double* Vt, double* U) {
    return assign_rows_impl<double>(X, b, e, d, c, cp, m, inv_m1, Vt, U);
}
VFLSEC_FCM_CLONES double assign_rows_f32(const float* X, std::size_t b, std::size_t e, std::size_t d, std::size_t c,
                                         std::size_t cp, double m, double inv_m1, const double* Vt, float* U) {
    return assign_rows_impl<float>(X, b, e, d, c, cp, m, inv_m1, Vt, U);
}
VFLSEC_FCM_CLONES void accumulate_centers_f64(const double* X, std::size_t b, std::size_t e, std::size_t d,
                                              std::size_t c, double m, const double* U, double* num, double* den) {
    accumulate_centers_impl<double>(X, b, e, d, c, m, U, num, den);
}
VFLSEC_FCM_CLONES void accumulate_centers_f32(const float* X, std::size_t b, std::size_t e, std::size_t d,
                                              std::size_t c, double m, const float* U, double* num, double* den) {
    accumulate_centers_impl<float>(X, b, e, d, c, m, U, num, den);
}
inline double assign_rows(const double* X, std::size_t b, std::size_t e, std::size_t d, std::size_t c, std::size_t cp,
                          double m, double inv_m1, const double* Vt, double* U) {
    return assign_rows_f64(X, b, e, d, c, cp, m, inv_m1, Vt, U);
}
inline double assign_rows(const float* X, std::size_t b, std::size_t e, std::size_t d, std::size_t c, std::size_t cp,
                          double m, double inv_m1, const double* Vt, float* U) {
    return assign_rows_f32(X, b, e, d, c, cp, m, inv_m1, Vt, U);
}
inline void accumulate_centers(const double* X, std::size_t b, std::size_t e, std::size_t d, std::size_t c, double m,
                               const double* U, double* num, double* den) {
    accumulate_centers_f64(X, b, e, d, c, m, U, num, den);
}
inline void accumulate_centers(const float* X, std::size_t b, std::size_t e, std::size_t d, std::size_t c, double m,
                               const float* U, double* num, double* den) {
    accumulate_centers_f32(X, b, e, d, c, m, U, num, den);
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
    std::vector<double> V(c * d), V_prev(c * d);
    std::vector<double> partial_num(static_cast<std::size_t>(nt) * c * d), partial_den(static_cast<std::size_t>(nt) * c);
    std::vector<double> partial_obj(nt);
    const std::size_t cp = (c + 7) / 8 * 8;
    std::vector<double> Vt(d * cp, 0.0);

    auto assign = [&]() {
        for (std::size_t j = 0; j < c; ++j)
            for (std::size_t k = 0; k < d; ++k) Vt[k * cp + j] = V[j * d + k];
#pragma omp parallel num_threads(nt)
        {
            const int t = omp_get_thread_num();
            std::size_t b, e;
            chunk(n, t, nt, b, e);
            partial_obj[t] = assign_rows(X, b, e, d, c, cp, m, inv_m1, Vt.data(), U);
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
    }
    for (int it = 1; it <= max_iter; ++it) {
        std::fill(partial_num.begin(), partial_num.end(), 0.0);
        std::fill(partial_den.begin(), partial_den.end(), 0.0);
#pragma omp parallel num_threads(nt)
        {
            const int t = omp_get_thread_num();
            std::size_t b, e;
            chunk(n, t, nt, b, e);
            accumulate_centers(X, b, e, d, c, m, U, partial_num.data() + static_cast<std::size_t>(t) * c * d,
                                  partial_den.data() + static_cast<std::size_t>(t) * c);
        }
        for (std::size_t j = 0; j < c; ++j) {
            double den = 0.0;
            for (int t = 0; t < nt; ++t) den += partial_den[static_cast<std::size_t>(t) * c + j];
            for (std::size_t k = 0; k < d; ++k) {
                double num = 0.0;
                for (int t = 0; t < nt; ++t) num += partial_num[(static_cast<std::size_t>(t) * c + j) * d + k];
                // A cluster with no weight keeps its previous centre (only possible
                // when every membership of it underflowed to zero).
                V[j * d + k] = den > 0.0 ? num / den : (have_prev ? V_prev[j * d + k] : 0.0);
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
                V_prev = V;
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
