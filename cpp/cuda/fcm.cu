// Fuzzy c-means on the GPU: the iteration of cpp/fcm.hpp, in four kernels
// per iteration, deterministic (every sum runs in a fixed order that depends
// on (n, c, d) only).
//
//   CentreUpdate  v_j = sum_i u_ij^m x_i / sum_i u_ij^m  (from the last pass)
//   CentreShift   ||v_j^(p) - v_j^(p-1)||, and clusters without weight
//   MembershipPass  one thread per point: squared distances by explicit
//                 differences, memberships u_ij, u_ij^m (double), its share of
//                 J_m, label and confidence
//   ChunkSums     one thread per (chunk of points, centre coordinate): the
//                 chunk's sum_i u_ij^m x_ik, sum_i u_ij^m and objective share
//   Finish        one thread: J_p, shift_p, weightless cluster -> 3 doubles
//
// The host reads those 3 doubles after each iteration to apply the stopping
// test. Arithmetic per point follows cpp/fcm.cpp (memberships from ratios
// dmin / d2 in [0, 1], a point on a centre gets membership 1 there with no
// division by zero, the same exact power paths for quarter-multiple
// exponents); sums of u^m and the objective are in double as on the CPU.
#include <cmath>
#include <limits>

#include "api.hpp"
#include "fcm_power_plan.hpp"
#include "exec.cuh"

namespace vflsec::cuda {
namespace {

using fcm::make_power_plan;
using fcm::PowerPlan;

// x^e for x >= 0 by the PowerPlan of cpp/fcm_power_plan.hpp (the CPU's choice).
template <typename T>
VFLSEC_HD T power(T x, const PowerPlan& plan) {
    if (!plan.by_roots) return pow_of(x, static_cast<T>(plan.exponent));
    T base = x;
    for (int r = 0; r < plan.roots; ++r) base = sqrt_of(base);
    T result = base;  // the highest set bit of power
    unsigned bit = 1u;
    while ((bit << 1) <= plan.power) bit <<= 1;
    for (bit >>= 1; bit != 0; bit >>= 1) {
        result *= result;
        if (plan.power & bit) result *= base;
    }
    return result;
}

struct Layout {
    std::size_t chunk_points;
    std::size_t n_chunks;
};

// Chunks of 256 points, fewer and larger when their partial sums would
// exceed 2^22 doubles (32 MiB).
Layout make_layout(std::size_t n, std::size_t c, std::size_t d) {
    const std::size_t per_chunk = c * d + c + 1;
    std::size_t max_chunks = (std::size_t(1) << 22) / per_chunk;
    if (max_chunks < 1) max_chunks = 1;
    std::size_t chunk_points = 256;
    if ((n + chunk_points - 1) / chunk_points > max_chunks) chunk_points = (n + max_chunks - 1) / max_chunks;
    return Layout{chunk_points, (n + chunk_points - 1) / chunk_points};
}

// Offsets into the float64 workspace.
struct Workspace {
    double* um;         // n x c: squared distances during a pass, then u^m
    double* obj_point;  // n
    double* num_part;   // n_chunks x c x d
    double* den_part;   // n_chunks x c
    double* obj_part;   // n_chunks
    double* shift;      // c
    double* weightless; // c: 1 where sum_i u_ij^m == 0
    double* result;     // objective, shift, weightless cluster (-1 if none)
    std::size_t doubles;
};

Workspace carve(double* base, std::size_t n, std::size_t c, std::size_t d, const Layout& L) {
    Workspace w;
    std::size_t off = 0;
    const auto take = [&](std::size_t count) {
        double* p = base == nullptr ? nullptr : base + off;
        off += count;
        return p;
    };
    w.um = take(n * c);
    w.obj_point = take(n);
    w.num_part = take(L.n_chunks * c * d);
    w.den_part = take(L.n_chunks * c);
    w.obj_part = take(L.n_chunks);
    w.shift = take(c);
    w.weightless = take(c);
    w.result = take(3);
    w.doubles = off;
    return w;
}

template <typename T>
struct MembershipPass {
    const T* X;
    const T* centers;          // c x d
    const T* init_membership;  // n x c rows for the first pass of a membership start, else null
    std::size_t n, d, c;
    double m;
    bool square;  // m == 2
    PowerPlan weight_power;     // 1 / (m - 1)
    PowerPlan fuzzifier_power;  // m
    T* membership;              // n x c: w during the pass, then u
    double* um;
    double* obj_point;
    std::int64_t* labels;
    T* confidence;

    VFLSEC_HD void operator()(std::size_t i) const {
        double* umi = um + i * c;
        if (init_membership != nullptr) {
            // u^m from the given rows renormalised to sum 1, in double.
            const T* start = init_membership + i * c;
            double row_sum = 0.0;
            for (std::size_t j = 0; j < c; ++j) row_sum += static_cast<double>(start[j]);
            for (std::size_t j = 0; j < c; ++j) {
                const double u = static_cast<double>(start[j]) / row_sum;
                umi[j] = square ? u * u : pow_of(u, m);
            }
            obj_point[i] = 0.0;
            return;
        }
        const T* xi = X + i * d;
        T* ui = membership + i * c;
        T dmin = T(0);
        for (std::size_t j = 0; j < c; ++j) {
            const T* v = centers + j * d;
            T acc = T(0);
            for (std::size_t k = 0; k < d; ++k) {
                const T diff = xi[k] - v[k];
                acc = fma_of(diff, diff, acc);
            }
            umi[j] = static_cast<double>(acc);  // exact: read back as T below
            dmin = (j == 0 || acc < dmin) ? acc : dmin;
        }
        // w_ij = (dmin / d2_ij)^(1/(m-1)) in [0, 1]; a centre at distance 0
        // gets ratio 1 (and every other centre 0 / d2 = 0).
        T wsum = T(0);
        for (std::size_t j = 0; j < c; ++j) {
            const T d2 = static_cast<T>(umi[j]);
            const T r = d2 > T(0) ? dmin / d2 : T(1);
            const T w = square ? r : power(r, weight_power);
            ui[j] = w;
            wsum += w;
        }
        const T inv_sum = T(1) / wsum;
        const bool pow_fallback = !square && !fuzzifier_power.by_roots;
        // u^m = w^m / wsum^m = w * ratio * wsum^-m: one pow per point.
        const T sum_pow = pow_fallback ? pow_of(wsum, static_cast<T>(-m)) : T(0);
        double objective = 0.0;
        std::int64_t best = 0;
        T best_u = T(0);
        for (std::size_t j = 0; j < c; ++j) {
            const T w = ui[j];
            const T u = w * inv_sum;
            const T d2 = static_cast<T>(umi[j]);
            T u_m;
            if (square) {
                u_m = u * u;
            } else if (!pow_fallback) {
                u_m = power(u, fuzzifier_power);
            } else {
                const T r = d2 > T(0) ? dmin / d2 : T(1);
                u_m = w * r * sum_pow;
            }
            const double um_d = static_cast<double>(u_m);
            objective += um_d * static_cast<double>(d2);
            umi[j] = um_d;
            ui[j] = u;
            if (j == 0 || u > best_u) {
                best_u = u;
                best = static_cast<std::int64_t>(j);
            }
        }
        labels[i] = best;
        confidence[i] = best_u;
        obj_point[i] = objective;
    }
};

// One thread: quantity q of chunk `ch`, where q < c d is sum_i u_ij^m x_ik
// (j = q / d, k = q % d), q < c d + c is sum_i u_ij^m (j = q - c d), and
// q = c d + c is the chunk's objective share; i runs over the chunk in order.
template <typename T>
struct ChunkSums {
    const T* X;
    const double* um;
    const double* obj_point;
    std::size_t n, d, c;
    std::size_t chunk_points;
    double* num_part;
    double* den_part;
    double* obj_part;

    VFLSEC_HD void operator()(std::size_t t) const {
        const std::size_t per_chunk = c * d + c + 1;
        const std::size_t ch = t / per_chunk, q = t % per_chunk;
        const std::size_t i0 = ch * chunk_points, i1 = min_of(n, i0 + chunk_points);
        double s = 0.0;
        if (q < c * d) {
            const std::size_t j = q / d, k = q % d;
            for (std::size_t i = i0; i < i1; ++i) s += um[i * c + j] * static_cast<double>(X[i * d + k]);
            num_part[ch * c * d + q] = s;
        } else if (q < c * d + c) {
            const std::size_t j = q - c * d;
            for (std::size_t i = i0; i < i1; ++i) s += um[i * c + j];
            den_part[ch * c + j] = s;
        } else {
            for (std::size_t i = i0; i < i1; ++i) s += obj_point[i];
            obj_part[ch] = s;
        }
    }
};

VFLSEC_HD double chunk_total(const double* parts, std::size_t n_chunks, std::size_t stride, std::size_t index) {
    double s = 0.0;
    for (std::size_t ch = 0; ch < n_chunks; ++ch) s += parts[ch * stride + index];
    return s;
}

// One thread per centre coordinate q = j d + k.
template <typename T>
struct CentreUpdate {
    const double* num_part;
    const double* den_part;
    std::size_t n_chunks, d, c;
    bool have_previous;
    const T* current;
    T* next;

    VFLSEC_HD void operator()(std::size_t q) const {
        const std::size_t j = q / d;
        const double den = chunk_total(den_part, n_chunks, c, j);
        if (den > 0.0) {
            next[q] = static_cast<T>(chunk_total(num_part, n_chunks, c * d, q) / den);
        } else {
            // Every u_ij^m underflowed: the centre stays (without a previous
            // centre the run stops with an error; 0 keeps the pass finite).
            next[q] = have_previous ? current[q] : T(0);
        }
    }
};

// One thread per centre j.
template <typename T>
struct CentreShift {
    const double* den_part;
    std::size_t n_chunks, d, c;
    const T* current;
    const T* next;
    double* shift;
    double* weightless;

    VFLSEC_HD void operator()(std::size_t j) const {
        weightless[j] = chunk_total(den_part, n_chunks, c, j) > 0.0 ? 0.0 : 1.0;
        double s = 0.0;
        for (std::size_t k = 0; k < d; ++k) {
            const double delta = static_cast<double>(next[j * d + k]) - static_cast<double>(current[j * d + k]);
            s += delta * delta;
        }
        shift[j] = sqrt_of(s);
    }
};

struct Finish {
    const double* obj_part;
    const double* shift;
    const double* weightless;
    std::size_t n_chunks, c;
    bool have_previous;
    double* result;

    VFLSEC_HD void operator()(std::size_t) const {
        double objective = 0.0;
        for (std::size_t ch = 0; ch < n_chunks; ++ch) objective += obj_part[ch];
        double largest = 0.0;
        double first_weightless = -1.0;
        for (std::size_t j = 0; j < c; ++j) {
            largest = shift[j] > largest ? shift[j] : largest;
            if (first_weightless < 0.0 && weightless[j] != 0.0) first_weightless = static_cast<double>(j);
        }
        result[0] = objective;
        result[1] = have_previous ? largest : INFINITY;
        result[2] = have_previous ? -1.0 : first_weightless;
    }
};

template <typename T, class Exec>
FcmOutcome fuzzy_cmeans_run(const Exec& exec, const T* X, std::size_t n, std::size_t d, std::size_t c, double m,
                            int max_iter, double tol, bool centers_start, const T* init_membership,
                            T* centers_scratch, T* centers, T* membership, std::int64_t* labels, T* confidence,
                            double* workspace) {
    const Layout L = make_layout(n, c, d);
    const Workspace W = carve(workspace, n, c, d, L);
    T* current = centers_scratch;
    T* next = centers_scratch + c * d;

    MembershipPass<T> pass{X,      current, nullptr,   n,          d,           c,      m,
                           m == 2.0, make_power_plan(1.0 / (m - 1.0)), make_power_plan(m),
                           membership, W.um, W.obj_point, labels, confidence};
    const ChunkSums<T> sums{X, W.um, W.obj_point, n, d, c, L.chunk_points, W.num_part, W.den_part, W.obj_part};
    const std::size_t sum_threads = L.n_chunks * (c * d + c + 1);

    FcmOutcome out;
    out.center_shift = std::numeric_limits<double>::infinity();
    bool have_previous = centers_start;
    if (!centers_start) pass.init_membership = init_membership;
    exec.run(n, pass);
    exec.run(sum_threads, sums);
    pass.init_membership = nullptr;

    for (int p = 1; p <= max_iter; ++p) {
        exec.run(c * d, CentreUpdate<T>{W.num_part, W.den_part, L.n_chunks, d, c, have_previous, current, next});
        exec.run(c, CentreShift<T>{W.den_part, L.n_chunks, d, c, current, next, W.shift, W.weightless});
        T* t = current;
        current = next;
        next = t;
        pass.centers = current;
        exec.run(n, pass);
        exec.run(sum_threads, sums);
        exec.run(1, Finish{W.obj_part, W.shift, W.weightless, L.n_chunks, c, have_previous, W.result});
        double result[3];
        exec.read_back(result, W.result, sizeof result);
        if (result[2] >= 0.0) {
            out.weightless_cluster = static_cast<long long>(result[2]);
            return out;
        }
        have_previous = true;
        out.objective_history.push_back(result[0]);
        out.n_iter = p;
        out.center_shift = result[1];
        if (result[1] < tol) {
            out.converged = true;
            break;
        }
    }
    exec.copy(centers, current, c * d * sizeof(T));
    return out;
}

}  // namespace

std::size_t fcm_workspace(std::size_t n, std::size_t c, std::size_t d) {
    return carve(nullptr, n, c, d, make_layout(n, c, d)).doubles;
}

template <typename T>
FcmOutcome fuzzy_cmeans_device(const T* X, std::size_t n, std::size_t d, std::size_t c, double m, int max_iter,
                               double tol, bool centers_start, const T* init_membership, T* centers_scratch,
                               T* centers, T* membership, std::int64_t* labels, T* confidence, double* workspace,
                               int device, std::uintptr_t stream) {
    return fuzzy_cmeans_run(DeviceExec(device, stream), X, n, d, c, m, max_iter, tol, centers_start, init_membership,
                            centers_scratch, centers, membership, labels, confidence, workspace);
}

template <typename T>
FcmOutcome fuzzy_cmeans_host(const T* X, std::size_t n, std::size_t d, std::size_t c, double m, int max_iter,
                             double tol, bool centers_start, const T* init_membership, T* centers_scratch,
                             T* centers, T* membership, std::int64_t* labels, T* confidence, double* workspace) {
    return fuzzy_cmeans_run(HostExec(), X, n, d, c, m, max_iter, tol, centers_start, init_membership,
                            centers_scratch, centers, membership, labels, confidence, workspace);
}

#define VFLSEC_INSTANTIATE(T)                                                                                        \
    template FcmOutcome fuzzy_cmeans_device<T>(const T*, std::size_t, std::size_t, std::size_t, double, int, double,  \
                                               bool, const T*, T*, T*, T*, std::int64_t*, T*, double*, int,          \
                                               std::uintptr_t);                                                      \
    template FcmOutcome fuzzy_cmeans_host<T>(const T*, std::size_t, std::size_t, std::size_t, double, int, double,    \
                                             bool, const T*, T*, T*, T*, std::int64_t*, T*, double*);
VFLSEC_INSTANTIATE(float)
VFLSEC_INSTANTIATE(double)
#undef VFLSEC_INSTANTIATE

}  // namespace vflsec::cuda
