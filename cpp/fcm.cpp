// Fuzzy c-means: one fused pass over the data per iteration.
//
// A pass takes centres V, and for every point computes its memberships U(V),
// its share of J_m(U(V), V) and its contribution to the next centres' sums
// (sum_i u_ij^m x_i, sum_i u_ij^m). Memberships are only stored in the final
// pass, so an iteration reads X once and writes nothing of size n.
//
// Determinism: the points are cut into chunks whose size depends on (n, c, d)
// only. Each chunk's partial sums are kept separately and added in chunk
// order, and inside a chunk every sum runs in a fixed order over fixed SIMD
// lanes, so on a given machine results are bitwise identical for every
// thread count. The ISA paths (isa::fcm_family(): default, avx2, avx512f)
// compile the same lane code for different vector widths. AVX-512F has
// fused multiply-adds on 512-bit vectors, which GCC forms for the float64
// lanes (8 doubles: one zmm register) of the avx512f path: its float64
// results can differ from the other paths' in the last bits. float32 results
// (8 floats: a ymm register, no FMA without AVX-512VL / FMA3) agree on every path.
#include "fcm.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "fcm_power_plan.hpp"
#include "host_device.hpp"
#include "isa_dispatch.hpp"
#include "parallel.hpp"

namespace vflsec::fcm {
namespace detail {

// Points handled together. Every per-point step runs across them in SIMD
// lanes (GCC vector extensions: 8 lanes, one AVX-512 register of doubles, two
// AVX2 or four SSE2 registers; each ISA path's entry point lowers them for
// its ISA), so the hot loops need no horizontal reductions.
constexpr std::size_t kLanes = 8;
constexpr std::size_t kGroups = 4;  // lane groups per block
constexpr std::size_t kBlock = kLanes * kGroups;

typedef double VecD __attribute__((vector_size(kLanes * sizeof(double))));
typedef float VecF __attribute__((vector_size(kLanes * sizeof(float))));
typedef std::int64_t MaskD __attribute__((vector_size(kLanes * sizeof(double))));
typedef std::int32_t MaskF __attribute__((vector_size(kLanes * sizeof(float))));

template <typename T>
struct Lanes;
template <>
struct Lanes<double> {
    using Vec = VecD;
    using Mask = MaskD;
};
template <>
struct Lanes<float> {
    using Vec = VecF;
    using Mask = MaskF;
};

// Widening to double; a macro rather than a function because a function
// returning a vector type trips GCC's psABI warnings in the baseline clone.
#define VFLSEC_TO_DOUBLE(v) __builtin_convertvector((v), VecD)

// Owning 64-byte-aligned array of SIMD vectors (std::vector does not promise
// the over-alignment of vector types through its allocator on every library).
template <typename V>
class AlignedVectors {
public:
    explicit AlignedVectors(std::size_t count)
        : count_(count),
          data_(static_cast<V*>(::operator new(std::max<std::size_t>(count, 1) * sizeof(V), std::align_val_t{64}))) {
        std::fill(data_, data_ + count_, V{});
    }
    AlignedVectors(AlignedVectors&& other) noexcept : count_(other.count_), data_(other.data_) {
        other.data_ = nullptr;
        other.count_ = 0;
    }
    AlignedVectors(const AlignedVectors&) = delete;
    AlignedVectors& operator=(const AlignedVectors&) = delete;
    AlignedVectors& operator=(AlignedVectors&&) = delete;
    ~AlignedVectors() {
        if (data_ != nullptr) ::operator delete(data_, std::align_val_t{64});
    }
    V* data() { return data_; }
    void clear() { std::fill(data_, data_ + count_, V{}); }

private:
    std::size_t count_;
    V* data_;
};

// Per-thread scratch, sizes in lane groups.
template <typename T>
struct Workspace {
    using Vec = typename Lanes<T>::Vec;
    AlignedVectors<Vec> xt;       // d x kGroups: the block transposed, point index in the lanes
    AlignedVectors<VecD> xt_f64;  // the same in double, for float32 centre sums
    AlignedVectors<Vec> dist2;    // c x kGroups squared distances
    AlignedVectors<Vec> ratio;    // c x kGroups dmin / dist2 in [0, 1]
    AlignedVectors<Vec> weight;   // c x kGroups ratio^(1/(m-1)), then the membership
    AlignedVectors<VecD> um;      // c x kGroups u^m, 0 in padding lanes
    AlignedVectors<VecD> num;     // c x d lane-partial sums of u^m x
    AlignedVectors<VecD> den;     // c lane-partial sums of u^m
    AlignedVectors<VecD> obj;     // kGroups lane-partial objective

    Workspace(std::size_t d, std::size_t c)
        : xt(d * kGroups),
          xt_f64(sizeof(T) == sizeof(double) ? 0 : d * kGroups),
          dist2(c * kGroups),
          ratio(c * kGroups),
          weight(c * kGroups),
          um(c * kGroups),
          num(c * d),
          den(c),
          obj(kGroups) {}
};

// x^e in SIMD lanes by the PowerPlan of fcm_power_plan.hpp (std::pow lane by
// lane for exponents it cannot take apart).
template <typename Vec, typename T>
VFLSEC_ALWAYS_INLINE void power_lanes(const Vec& x, const PowerPlan& plan, Vec& out) {
    if (!plan.by_roots) {
        const T e = static_cast<T>(plan.exponent);
        for (std::size_t l = 0; l < kLanes; ++l) out[l] = std::pow(x[l], e);
        return;
    }
    Vec base = x;
    for (int r = 0; r < plan.roots; ++r)
        for (std::size_t l = 0; l < kLanes; ++l) base[l] = std::sqrt(base[l]);
    Vec result = base;  // the highest set bit of power
    unsigned bit = 1u;
    while ((bit << 1) <= plan.power) bit <<= 1;
    for (bit >>= 1; bit != 0; bit >>= 1) {
        result *= result;
        if (plan.power & bit) result *= base;
    }
    out = result;
}

template <typename T>
struct Pass {
    const T* x;
    std::size_t n, d, c;
    std::size_t chunk_points;
    const T* centers;  // c x d
    // Non-null in the first pass of a membership start: take u^m from these
    // rows (n x c) instead of from distances to centres.
    const T* initial_membership;
    double m;
    PowerPlan weight_power;  // exponent 1/(m-1)
    PowerPlan fuzzifier_power;  // exponent m
    bool accumulate;   // compute the next centres' sums
    bool store;        // final pass: write memberships, labels, confidence
    T* membership;
    std::int64_t* labels;
    T* confidence;
    double* num_parts;  // per chunk: c x d
    double* den_parts;  // per chunk: c
    double* obj_parts;  // per chunk: 1
};

template <typename T, bool kSquare>
VFLSEC_ALWAYS_INLINE void chunk_body(const Pass<T>& pass, std::size_t chunk, Workspace<T>& ws) {
    using Vec = typename Lanes<T>::Vec;
    using Mask = typename Lanes<T>::Mask;
    constexpr std::size_t G = kGroups;
    const std::size_t d = pass.d, c = pass.c;
    const std::size_t begin = chunk * pass.chunk_points;
    const std::size_t end = std::min(pass.n, begin + pass.chunk_points);
    const T* __restrict x = pass.x;
    const T* __restrict centers = pass.centers;
    const T* __restrict start = pass.initial_membership;
    Vec* __restrict xt = ws.xt.data();
    Vec* __restrict dist2 = ws.dist2.data();
    Vec* __restrict ratio = ws.ratio.data();
    Vec* __restrict weight = ws.weight.data();
    VecD* __restrict um = ws.um.data();
    VecD* __restrict num = ws.num.data();
    VecD* __restrict den = ws.den.data();
    VecD* __restrict obj = ws.obj.data();
    const VecD* xt_sum;  // the block as read by the centre sums (double)
    if constexpr (sizeof(T) == sizeof(double)) {
        xt_sum = xt;
    } else {
        xt_sum = ws.xt_f64.data();
    }
    const T neg_m = static_cast<T>(-pass.m);
    const PowerPlan weight_power = pass.weight_power;
    const PowerPlan fuzzifier_power = pass.fuzzifier_power;
    const Vec zero = {};
    const Vec one = zero + T(1);

    ws.num.clear();
    ws.den.clear();
    ws.obj.clear();

    for (std::size_t i0 = begin; i0 < end; i0 += kBlock) {
        const std::size_t nb = std::min(kBlock, end - i0);
        if (nb == kBlock) {
            // 8 x 8 tiles transposed in registers: 8 loads, 24 shuffles and
            // 8 stores instead of 64 scalar loads and 64 scalar stores.
            const std::size_t d_tiles = d - d % kLanes;
            for (std::size_t g = 0; g < G; ++g) {
                const T* base = x + (i0 + g * kLanes) * d;
                for (std::size_t k0 = 0; k0 < d_tiles; k0 += kLanes) {
                    Vec r[kLanes], a[kLanes];
                    for (std::size_t l = 0; l < kLanes; ++l) std::memcpy(&r[l], base + l * d + k0, sizeof(Vec));
                    for (std::size_t l = 0; l < kLanes; l += 2) {
                        a[l] = __builtin_shuffle(r[l], r[l + 1], Mask{0, 8, 2, 10, 4, 12, 6, 14});
                        a[l + 1] = __builtin_shuffle(r[l], r[l + 1], Mask{1, 9, 3, 11, 5, 13, 7, 15});
                    }
                    // a[0]: rows 0,1 columns 0,2,4,6; a[1]: rows 0,1 columns 1,3,5,7; ...
                    for (std::size_t h = 0; h < kLanes; h += 4)
                        for (std::size_t o = 0; o < 2; ++o) {
                            r[h + o] = __builtin_shuffle(a[h + o], a[h + o + 2], Mask{0, 1, 8, 9, 4, 5, 12, 13});
                            r[h + o + 2] = __builtin_shuffle(a[h + o], a[h + o + 2], Mask{2, 3, 10, 11, 6, 7, 14, 15});
                        }
                    // r[0]: rows 0-3 of columns 0,4; r[1]: columns 1,5; r[2]: 2,6;
                    // r[3]: 3,7; r[4..7] the same for rows 4-7.
                    Vec* out = xt + k0 * G + g;
                    for (std::size_t q = 0; q < 4; ++q) {
                        out[q * G] = __builtin_shuffle(r[q], r[q + 4], Mask{0, 1, 2, 3, 8, 9, 10, 11});
                        out[(q + 4) * G] = __builtin_shuffle(r[q], r[q + 4], Mask{4, 5, 6, 7, 12, 13, 14, 15});
                    }
                }
                for (std::size_t k = d_tiles; k < d; ++k)
                    for (std::size_t l = 0; l < kLanes; ++l) xt[k * G + g][l] = base[l * d + k];
            }
        } else {
            for (std::size_t b = 0; b < nb; ++b) {
                const T* row = x + (i0 + b) * d;
                for (std::size_t k = 0; k < d; ++k) xt[k * G + b / kLanes][b % kLanes] = row[k];
            }
        }
        // Padding lanes repeat the block's first point (finite distances);
        // their u^m is zeroed below so they add nothing.
        for (std::size_t b = nb; b < kBlock; ++b)
            for (std::size_t k = 0; k < d; ++k) xt[k * G + b / kLanes][b % kLanes] = xt[k * G][0];
        if constexpr (sizeof(T) != sizeof(double)) {
            if (pass.accumulate) {
                VecD* __restrict xd = ws.xt_f64.data();
                for (std::size_t q = 0; q < d * G; ++q) xd[q] = VFLSEC_TO_DOUBLE(xt[q]);
            }
        }

        if (start != nullptr) {
            // First step of a membership start: u^m straight from the given
            // rows, renormalised to sum 1 (in double whatever T is).
            for (std::size_t q = 0; q < c * G; ++q) um[q] = VecD{};
            for (std::size_t b = 0; b < nb; ++b) {
                const T* urow = start + (i0 + b) * c;
                double row_sum = 0.0;
                for (std::size_t j = 0; j < c; ++j) row_sum += static_cast<double>(urow[j]);
                for (std::size_t j = 0; j < c; ++j) {
                    const double u = static_cast<double>(urow[j]) / row_sum;
                    um[j * G + b / kLanes][b % kLanes] = kSquare ? u * u : std::pow(u, pass.m);
                }
            }
        } else {
            // Squared distances by explicit differences: exact zeros for points
            // on a centre, no cancellation as in |x|^2 - 2 x.v + |v|^2.
            for (std::size_t j = 0; j < c; ++j) {
                Vec acc[G];
                for (std::size_t g = 0; g < G; ++g) acc[g] = zero;
                const T* cj = centers + j * d;
                for (std::size_t k = 0; k < d; ++k) {
                    const Vec v = zero + cj[k];
                    for (std::size_t g = 0; g < G; ++g) {
                        const Vec diff = xt[k * G + g] - v;
                        acc[g] += diff * diff;
                    }
                }
                for (std::size_t g = 0; g < G; ++g) dist2[j * G + g] = acc[g];
            }

            Vec dmin[G];
            for (std::size_t g = 0; g < G; ++g) dmin[g] = dist2[g];
            for (std::size_t j = 1; j < c; ++j)
                for (std::size_t g = 0; g < G; ++g) {
                    const Vec v = dist2[j * G + g];
                    dmin[g] = v < dmin[g] ? v : dmin[g];
                }

            // u_ij = w_ij / sum_k w_ik with w_ij = (dmin_i / d2_ij)^(1/(m-1)) in
            // [0, 1]: the nearest centre has w = 1, so the sum is >= 1 and
            // nothing overflows. A point on a centre (dmin = 0) gets ratio 1 for
            // every centre it sits on (1/1) and 0 elsewhere (0/d2): membership
            // split evenly among coincident centres, no division by zero.
            Vec wsum[G];
            for (std::size_t g = 0; g < G; ++g) wsum[g] = zero;
            for (std::size_t j = 0; j < c; ++j)
                for (std::size_t g = 0; g < G; ++g) {
                    const Vec v = dist2[j * G + g];
                    const Mask pos = v > zero;
                    const Vec r = (pos ? dmin[g] : one) / (pos ? v : one);
                    Vec w = r;
                    if constexpr (!kSquare) {
                        power_lanes<Vec, T>(r, weight_power, w);
                        ratio[j * G + g] = r;
                    }
                    weight[j * G + g] = w;
                    wsum[g] += w;
                }
            Vec inv_sum[G];
            Vec sum_pow[G];  // wsum^-m
            for (std::size_t g = 0; g < G; ++g) {
                inv_sum[g] = one / wsum[g];
                if constexpr (!kSquare) {
                    if (!fuzzifier_power.by_roots)
                        for (std::size_t l = 0; l < kLanes; ++l) sum_pow[g][l] = std::pow(wsum[g][l], neg_m);
                }
            }
            VecD valid[G] = {};  // 1 for real points, 0 for padding lanes
            const bool partial = nb < kBlock;
            if (partial)
                for (std::size_t g = 0; g < G; ++g)
                    for (std::size_t l = 0; l < kLanes; ++l) valid[g][l] = g * kLanes + l < nb ? 1.0 : 0.0;
            // Without a cheap u^m: u^m = w^m / wsum^m and w^m = w * w^(m-1) =
            // w * ratio, so one pow per point instead of one per membership.
            VecD obj_acc[G];
            for (std::size_t g = 0; g < G; ++g) obj_acc[g] = obj[g];
            for (std::size_t j = 0; j < c; ++j)
                for (std::size_t g = 0; g < G; ++g) {
                    const Vec w = weight[j * G + g];
                    const Vec u = w * inv_sum[g];
                    Vec u_m;
                    if constexpr (kSquare) {
                        u_m = u * u;
                    } else if (fuzzifier_power.by_roots) {
                        power_lanes<Vec, T>(u, fuzzifier_power, u_m);
                    } else {
                        u_m = w * ratio[j * G + g] * sum_pow[g];
                    }
                    weight[j * G + g] = u;
                    VecD um_d = VFLSEC_TO_DOUBLE(u_m);
                    if (partial) um_d *= valid[g];
                    um[j * G + g] = um_d;
                    obj_acc[g] += um_d * VFLSEC_TO_DOUBLE(dist2[j * G + g]);
                }
            for (std::size_t g = 0; g < G; ++g) obj[g] = obj_acc[g];

            if (pass.store) {
                for (std::size_t b = 0; b < nb; ++b) {
                    const std::size_t i = i0 + b, g = b / kLanes, l = b % kLanes;
                    T* urow = pass.membership + i * c;
                    std::int64_t best = 0;
                    T best_u = weight[g][l];
                    for (std::size_t j = 0; j < c; ++j) {
                        const T u = weight[j * G + g][l];
                        urow[j] = u;
                        if (u > best_u) {
                            best_u = u;
                            best = static_cast<std::int64_t>(j);
                        }
                    }
                    pass.labels[i] = best;
                    pass.confidence[i] = best_u;
                }
            }
        }

        if (pass.accumulate) {
            for (std::size_t j = 0; j < c; ++j) {
                VecD umj[G];
                for (std::size_t g = 0; g < G; ++g) umj[g] = um[j * G + g];
                VecD dsum = den[j];
                for (std::size_t g = 0; g < G; ++g) dsum += umj[g];
                den[j] = dsum;
                VecD* numj = num + j * d;
                for (std::size_t k = 0; k < d; ++k) {
                    VecD acc = numj[k];
                    for (std::size_t g = 0; g < G; ++g) acc += umj[g] * xt_sum[k * G + g];
                    numj[k] = acc;
                }
            }
        }
    }

    double total = 0.0;
    for (std::size_t g = 0; g < G; ++g)
        for (std::size_t l = 0; l < kLanes; ++l) total += obj[g][l];
    pass.obj_parts[chunk] = total;
    if (pass.accumulate) {
        double* num_out = pass.num_parts + chunk * c * d;
        double* den_out = pass.den_parts + chunk * c;
        for (std::size_t q = 0; q < c * d; ++q) {
            double s = 0.0;
            for (std::size_t l = 0; l < kLanes; ++l) s += num[q][l];
            num_out[q] = s;
        }
        for (std::size_t j = 0; j < c; ++j) {
            double s = 0.0;
            for (std::size_t l = 0; l < kLanes; ++l) s += den[j][l];
            den_out[j] = s;
        }
    }
}

// One pass over a chunk, compiled once per ISA path: the template body is
// inlined into each entry point and compiled for its target there.
template <typename T>
VFLSEC_ALWAYS_INLINE void chunk_pass(const Pass<T>& pass, std::size_t chunk, Workspace<T>& ws) {
    if (pass.m == 2.0) {
        chunk_body<T, true>(pass, chunk, ws);
    } else {
        chunk_body<T, false>(pass, chunk, ws);
    }
}

template <typename T>
using ChunkFn = void (*)(const Pass<T>&, std::size_t, Workspace<T>&);

#define VFLSEC_FCM_ENTRY(name, attr, T) \
    attr void name(const Pass<T>& pass, std::size_t chunk, Workspace<T>& ws) { chunk_pass<T>(pass, chunk, ws); }
VFLSEC_FCM_ENTRY(chunk_f64_default, , double)
VFLSEC_FCM_ENTRY(chunk_f64_avx2, __attribute__((target("avx2"))), double)
VFLSEC_FCM_ENTRY(chunk_f64_avx512, __attribute__((target("avx512f"))), double)
VFLSEC_FCM_ENTRY(chunk_f32_default, , float)
VFLSEC_FCM_ENTRY(chunk_f32_avx2, __attribute__((target("avx2"))), float)
VFLSEC_FCM_ENTRY(chunk_f32_avx512, __attribute__((target("avx512f"))), float)
#undef VFLSEC_FCM_ENTRY

// Indexed like the paths of isa::fcm_family() (end of this file).
constexpr ChunkFn<double> kChunkF64[] = {chunk_f64_default, chunk_f64_avx2, chunk_f64_avx512};
constexpr ChunkFn<float> kChunkF32[] = {chunk_f32_default, chunk_f32_avx2, chunk_f32_avx512};

inline ChunkFn<double> chunk_kernel(const Pass<double>&) { return isa::fcm_family().pick(kChunkF64); }
inline ChunkFn<float> chunk_kernel(const Pass<float>&) { return isa::fcm_family().pick(kChunkF32); }

struct Layout {
    std::size_t chunk_points;
    std::size_t n_chunks;
};

// Chunks of 2048 points, at most 256 of them and at most ~32 MiB of stored
// partial sums; a function of (n, c, d) only, never of the thread count.
Layout make_layout(std::size_t n, std::size_t c, std::size_t d) {
    const std::size_t n_blocks = (n + kBlock - 1) / kBlock;
    const std::size_t per_part = c * d + c + 1;
    const std::size_t max_chunks =
        std::max<std::size_t>(1, std::min<std::size_t>(256, (std::size_t(1) << 22) / per_part));
    std::size_t blocks_per_chunk = 64;
    if ((n_blocks + blocks_per_chunk - 1) / blocks_per_chunk > max_chunks)
        blocks_per_chunk = (n_blocks + max_chunks - 1) / max_chunks;
    Layout layout;
    layout.chunk_points = blocks_per_chunk * kBlock;
    layout.n_chunks = (n + layout.chunk_points - 1) / layout.chunk_points;
    return layout;
}

}  // namespace detail

template <typename T>
Outcome fuzzy_cmeans(const T* x, std::size_t n, std::size_t d, std::size_t c, const Options& options,
                     const T* init_centers, const T* init_membership, T* centers, T* membership,
                     std::int64_t* labels, T* confidence) {
    using namespace detail;
    Outcome out;
    out.center_shift = std::numeric_limits<double>::infinity();
    const Layout layout = make_layout(n, c, d);
    const std::size_t n_chunks = layout.n_chunks;
    const int n_threads = static_cast<int>(
        std::max<std::size_t>(1, std::min<std::size_t>(static_cast<std::size_t>(num_threads()), n_chunks)));

    std::vector<Workspace<T>> workspaces;
    workspaces.reserve(static_cast<std::size_t>(n_threads));
    for (int t = 0; t < n_threads; ++t) workspaces.emplace_back(d, c);
    std::vector<double> num_parts(n_chunks * c * d), den_parts(n_chunks * c), obj_parts(n_chunks);
    std::vector<double> num(c * d), den(c);
    std::vector<T> current(c * d), next(c * d);

    Pass<T> pass{};
    pass.x = x;
    pass.n = n;
    pass.d = d;
    pass.c = c;
    pass.chunk_points = layout.chunk_points;
    pass.centers = current.data();
    pass.m = options.m;
    pass.weight_power = make_power_plan(1.0 / (options.m - 1.0));
    pass.fuzzifier_power = make_power_plan(options.m);
    pass.membership = membership;
    pass.labels = labels;
    pass.confidence = confidence;
    pass.num_parts = num_parts.data();
    pass.den_parts = den_parts.data();
    pass.obj_parts = obj_parts.data();

    const ChunkFn<T> process_chunk = chunk_kernel(pass);
    const auto run_pass = [&](bool accumulate, bool store) {
        pass.accumulate = accumulate;
        pass.store = store;
        const long long chunks = static_cast<long long>(n_chunks);
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads) if (n_threads > 1)
        for (long long ch = 0; ch < chunks; ++ch)
            process_chunk(pass, static_cast<std::size_t>(ch), workspaces[static_cast<std::size_t>(omp_get_thread_num())]);
        double objective = 0.0;
        for (std::size_t ch = 0; ch < n_chunks; ++ch) objective += obj_parts[ch];
        return objective;
    };
    const auto fold_parts = [&]() {
        std::fill(num.begin(), num.end(), 0.0);
        std::fill(den.begin(), den.end(), 0.0);
        for (std::size_t ch = 0; ch < n_chunks; ++ch) {
            const double* np = num_parts.data() + ch * c * d;
            const double* dp = den_parts.data() + ch * c;
            for (std::size_t q = 0; q < c * d; ++q) num[q] += np[q];
            for (std::size_t j = 0; j < c; ++j) den[j] += dp[j];
        }
    };

    bool have_previous = false;
    if (init_centers != nullptr) {
        std::copy(init_centers, init_centers + c * d, current.begin());
        run_pass(true, false);
        have_previous = true;
    } else {
        pass.initial_membership = init_membership;
        run_pass(true, false);
        pass.initial_membership = nullptr;
    }

    for (int p = 1; p <= options.max_iter; ++p) {
        fold_parts();
        for (std::size_t j = 0; j < c; ++j) {
            if (den[j] > 0.0) {
                for (std::size_t k = 0; k < d; ++k) next[j * d + k] = static_cast<T>(num[j * d + k] / den[j]);
            } else if (have_previous) {
                // Every u_ij^m underflowed (m near 1 or huge, or a far-away
                // centre): the centre keeps its place instead of becoming 0/0.
                std::copy(current.begin() + j * d, current.begin() + (j + 1) * d, next.begin() + j * d);
            } else {
                out.weightless_cluster = static_cast<std::ptrdiff_t>(j);
                return out;
            }
        }
        double shift = std::numeric_limits<double>::infinity();
        if (have_previous) {
            shift = 0.0;
            for (std::size_t j = 0; j < c; ++j) {
                double s = 0.0;
                for (std::size_t k = 0; k < d; ++k) {
                    const double delta =
                        static_cast<double>(next[j * d + k]) - static_cast<double>(current[j * d + k]);
                    s += delta * delta;
                }
                shift = std::max(shift, std::sqrt(s));
            }
        }
        current.swap(next);
        pass.centers = current.data();
        have_previous = true;
        const bool done = shift < options.tol;
        const bool last = done || p == options.max_iter;
        out.objective_history.push_back(run_pass(!last, last));
        out.n_iter = p;
        out.center_shift = shift;
        if (done) {
            out.converged = true;
            break;
        }
    }
    std::copy(current.begin(), current.end(), centers);
    return out;
}

template Outcome fuzzy_cmeans<float>(const float*, std::size_t, std::size_t, std::size_t, const Options&,
                                     const float*, const float*, float*, float*, std::int64_t*, float*);
template Outcome fuzzy_cmeans<double>(const double*, std::size_t, std::size_t, std::size_t, const Options&,
                                      const double*, const double*, double*, double*, std::int64_t*, double*);

}  // namespace vflsec::fcm

namespace vflsec::isa {
namespace {
// The paths target_clones("avx512f", "avx2", "default") used to give.
constexpr Path kFcmPaths[] = {{"default", 0}, {"avx2", kAvx2}, {"avx512f", kAvx512F}};
}  // namespace

Family& fcm_family() {
    static Family family("fcm", kFcmPaths);
    return family;
}

}  // namespace vflsec::isa
