// Distance tiles for any CPU: GCC vector extensions at 16 bytes (SSE2 on
// x86-64, NEON on arm64), no FMA, 16 registers: a 4-row x 8-column float tile.
#include <cmath>
#include <cstring>

#include "distances_kernels.hpp"

namespace vflsec::detail {
namespace {

template <typename Elem>
struct Vec16 {
    using T = Elem;
    typedef Elem V __attribute__((vector_size(16), __may_alias__));
    static constexpr int L = 16 / sizeof(Elem);
    static V zero() { return V{}; }
    static V load(const T* p) { return *reinterpret_cast<const V*>(p); }
    static V set1(T x) { return V{} + x; }
    static V sub(V a, V b) { return a - b; }
    static V add(V a, V b) { return a + b; }
    static V sqr_acc(V d, V acc) { return d * d + acc; }
    static V sqrt(V a) {
        for (int l = 0; l < L; ++l) a[l] = std::sqrt(a[l]);
        return a;
    }
    static V min(V a, V b) { return b < a ? b : a; }
    static V max(V a, V b) { return b > a ? b : a; }
    static void store(T* p, V a) { *reinterpret_cast<V*>(p) = a; }
    static void storeu(T* p, V a) { std::memcpy(p, &a, sizeof(V)); }
};

}  // namespace
}  // namespace vflsec::detail

#include "distances_tile.hpp"

namespace vflsec::detail {
extern const TileKernels<float> kTileKernelsBaselineF32 = DistanceTile<Vec16<float>, 4, 2>::table("baseline");
extern const TileKernels<double> kTileKernelsBaselineF64 = DistanceTile<Vec16<double>, 4, 2>::table("baseline");
}  // namespace vflsec::detail
