// Fuzzy c-means. One pass over the data per iteration, parallel over points:
// each point's squared distances to the current centres give its membership
// (a point on a centre gets membership 1 there, split evenly over ties), and
// the same pass accumulates that membership's u^m-weighted sums for the next
// centres. Per-thread partial sums are combined in thread order, so
// results are deterministic for a fixed thread count. Sums are accumulated in
// double whatever the input precision.
#include "fcm.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace vflsec {
namespace {

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

// Points are processed in blocks of kLanes, one point per SIMD lane, so
// distances, memberships and the centre sums run across points with no
// horizontal reductions; the lane partial sums are folded once per chunk.
constexpr std::size_t kLanes = 8;

template <typename T>
__attribute__((always_inline)) inline double assign_rows_impl(const T* X, std::size_t begin, std::size_t end,
                                                              std::size_t d, std::size_t c, double m, double inv_m1,
                                                              const double* V, T* U, double* num, double* den) {
    constexpr std::size_t L = kLanes;
    std::vector<double> xt(d * L), dist(c * L), uu(c * L), um(c * L), numv(c * d * L, 0.0), denv(c * L, 0.0);
    double objv[L] = {0.0};
    for (std::size_t i0 = begin; i0 < end; i0 += L) {
        const std::size_t nl = std::min(L, end - i0);
        double valid[L];
        for (std::size_t l = 0; l < L; ++l) valid[l] = l < nl ? 1.0 : 0.0;
        for (std::size_t l = 0; l < L; ++l)
            for (std::size_t k = 0; k < d; ++k) xt[k * L + l] = l < nl ? static_cast<double>(X[(i0 + l) * d + k]) : 0.0;
        double dmin[L];
        for (std::size_t j = 0; j < c; ++j) {
            double acc[L] = {0.0};
            for (std::size_t k = 0; k < d; ++k) {
                const double v = V[j * d + k];
                const double* xk = xt.data() + k * L;
#pragma omp simd
                for (std::size_t l = 0; l < L; ++l) {
                    const double diff = xk[l] - v;
                    acc[l] += diff * diff;
                }
            }
#pragma omp simd
            for (std::size_t l = 0; l < L; ++l) {
                dist[j * L + l] = acc[l];
                dmin[l] = j == 0 ? acc[l] : std::min(dmin[l], acc[l]);
            }
        }
        // w_j = (dmin / d_j)^(1/(m-1)) in (0, 1]; a point on a centre (dmin == 0)
        // gets weight 1 on every centre it sits on and 0 elsewhere.
        double total[L] = {0.0};
        for (std::size_t j = 0; j < c; ++j) {
            double* w = um.data() + j * L;
            const double* dj = dist.data() + j * L;
            if (inv_m1 == 1.0) {
#pragma omp simd
                for (std::size_t l = 0; l < L; ++l) {
                    const double on_centre = dj[l] == 0.0 ? 1.0 : 0.0;
                    w[l] = dmin[l] == 0.0 ? on_centre : dmin[l] / (dj[l] == 0.0 ? 1.0 : dj[l]);
                    total[l] += w[l];
                }
            } else {
                for (std::size_t l = 0; l < L; ++l) {
                    const double on_centre = dj[l] == 0.0 ? 1.0 : 0.0;
                    w[l] = dmin[l] == 0.0 ? on_centre : std::pow(dmin[l] / dj[l], inv_m1);
                    total[l] += w[l];
                }
            }
        }
        for (std::size_t j = 0; j < c; ++j) {
            double* w = um.data() + j * L;
            double* u = uu.data() + j * L;
            const double* dj = dist.data() + j * L;
            if (m == 2.0) {
#pragma omp simd
                for (std::size_t l = 0; l < L; ++l) {
                    // The centres use the stored (working-precision) membership.
                    const double ur = static_cast<double>(static_cast<T>(w[l] / total[l]));
                    u[l] = ur;
                    w[l] = ur * ur * valid[l];
                    objv[l] += w[l] * dj[l];
                }
            } else {
                for (std::size_t l = 0; l < L; ++l) {
                    const double ur = static_cast<double>(static_cast<T>(w[l] / total[l]));
                    u[l] = ur;
                    w[l] = std::pow(ur, m) * valid[l];
                    objv[l] += w[l] * dj[l];
                }
            }
        }
        for (std::size_t l = 0; l < nl; ++l)
            for (std::size_t j = 0; j < c; ++j) U[(i0 + l) * c + j] = static_cast<T>(uu[j * L + l]);
        for (std::size_t j = 0; j < c; ++j) {
            const double* w = um.data() + j * L;
#pragma omp simd
            for (std::size_t l = 0; l < L; ++l) denv[j * L + l] += w[l];
            for (std::size_t k = 0; k < d; ++k) {
                double* acc = numv.data() + (j * d + k) * L;
                const double* xk = xt.data() + k * L;
#pragma omp simd
                for (std::size_t l = 0; l < L; ++l) acc[l] += w[l] * xk[l];
            }
        }
    }
    for (std::size_t j = 0; j < c; ++j) {
        for (std::size_t l = 0; l < L; ++l) den[j] += denv[j * L + l];
        for (std::size_t k = 0; k < d; ++k)
            for (std::size_t l = 0; l < L; ++l) num[j * d + k] += numv[(j * d + k) * L + l];
    }
    double obj = 0.0;
    for (std::size_t l = 0; l < L; ++l) obj += objv[l];
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
                                         double m, double inv_m1, const double* V, double* U, double* num,
                                         double* den) {
    return assign_rows_impl<double>(X, b, e, d, c, m, inv_m1, V, U, num, den);
}
VFLSEC_FCM_CLONES double assign_rows_f32(const float* X, std::size_t b, std::size_t e, std::size_t d, std::size_t c,
                                         double m, double inv_m1, const double* V, float* U, double* num,
                                         double* den) {
    return assign_rows_impl<float>(X, b, e, d, c, m, inv_m1, V, U, num, den);
}
VFLSEC_FCM_CLONES void accumulate_rows_f64(const double* X, std::size_t b, std::size_t e, std::size_t d,
                                           std::size_t c, double m, const double* U, double* num, double* den) {
    accumulate_rows_impl<double>(X, b, e, d, c, m, U, num, den);
}
VFLSEC_FCM_CLONES void accumulate_rows_f32(const float* X, std::size_t b, std::size_t e, std::size_t d,
                                           std::size_t c, double m, const float* U, double* num, double* den) {
    accumulate_rows_impl<float>(X, b, e, d, c, m, U, num, den);
}
inline double assign_rows(const double* X, std::size_t b, std::size_t e, std::size_t d, std::size_t c, double m,
                          double inv_m1, const double* V, double* U, double* num, double* den) {
    return assign_rows_f64(X, b, e, d, c, m, inv_m1, V, U, num, den);
}
inline double assign_rows(const float* X, std::size_t b, std::size_t e, std::size_t d, std::size_t c, double m,
                          double inv_m1, const double* V, float* U, double* num, double* den) {
    return assign_rows_f32(X, b, e, d, c, m, inv_m1, V, U, num, den);
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
    std::vector<double> V(c * d), V_prev(c * d);
    std::vector<double> num(static_cast<std::size_t>(nt) * c * d), den(static_cast<std::size_t>(nt) * c);
    std::vector<double> partial_obj(nt);

    // Memberships from V, and the u^m-weighted sums of those memberships.
    auto assign = [&]() {
        std::fill(num.begin(), num.end(), 0.0);
        std::fill(den.begin(), den.end(), 0.0);
#pragma omp parallel num_threads(nt)
        {
            const int t = omp_get_thread_num();
            std::size_t b, e;
            chunk(n, t, nt, b, e);
            partial_obj[t] = assign_rows(X, b, e, d, c, m, inv_m1, V.data(), U,
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

template <typename T>
void hard_assignments(const T* U, std::size_t n, std::size_t c, std::int64_t* labels, T* confidence) {
#pragma omp parallel for schedule(static)
    for (std::size_t i = 0; i < n; ++i) {
        const T* u = U + i * c;
        std::size_t best = 0;
        for (std::size_t j = 1; j < c; ++j)
            if (u[j] > u[best]) best = j;
        labels[i] = static_cast<std::int64_t>(best);
        confidence[i] = u[best];
    }
}

template void hard_assignments<float>(const float*, std::size_t, std::size_t, std::int64_t*, float*);
template void hard_assignments<double>(const double*, std::size_t, std::size_t, std::int64_t*, double*);

template FCMStatus fuzzy_cmeans<float>(const float*, std::size_t, std::size_t, std::size_t, double, int, double, bool,
                                       float*, float*);
template FCMStatus fuzzy_cmeans<double>(const double*, std::size_t, std::size_t, std::size_t, double, int, double,
                                        bool, double*, double*);

}  // namespace vflsec
