// How fuzzy c-means raises memberships and distance ratios to the powers
// 1/(m-1) and m, shared by the CPU pass (cpp/fcm.cpp, in SIMD lanes) and the
// CUDA kernels (cpp/cuda/fcm.cu): both choose the same evaluation, so both
// round the same way.
//
// x^e for x >= 0 without a pow call when e * 2^roots is an integer up to
// 1024 for roots <= 2 (m = 1.5, 3, 5, 1.25, ...: the exponents 1/(m-1) and m
// alike): `roots` square roots, then exponentiation by squaring. Other
// exponents (m = 2.5, 1.7, ...) fall back to pow, several times slower.
#pragma once

#include <cmath>

namespace vflsec::fcm {

struct PowerPlan {
    double exponent = 1.0;
    bool by_roots = false;
    int roots = 0;
    unsigned power = 1;
};

inline PowerPlan make_power_plan(double exponent) {
    PowerPlan plan;
    plan.exponent = exponent;
    for (int roots = 0; roots <= 2; ++roots) {
        const double k = std::ldexp(exponent, roots);
        if (k >= 1.0 && k <= 1024.0 && k == std::floor(k)) {
            plan.by_roots = true;
            plan.roots = roots;
            plan.power = static_cast<unsigned>(k);
            return plan;
        }
    }
    return plan;
}

}  // namespace vflsec::fcm
