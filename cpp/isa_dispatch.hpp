// Run-time instruction-set dispatch, the one mechanism every CPU kernel uses.
//
// The extension is compiled for baseline x86-64 (SSE2) so that the wheel runs
// on any x86-64 CPU. Each hot kernel is compiled once per instruction set it
// supports (a function carrying __attribute__((target("..."))), or a whole
// translation unit under #pragma GCC target) and the variants are entries of a
// function table. A kernel *family* (the noise kernels, the distance tiles,
// fuzzy c-means) names its paths and picks the table entry at run time:
//
//   * the CPU's features are detected once per process (cpu());
//   * a Family lists its paths, each with the features it requires; on first
//     use it takes the best path this CPU supports (the last supported one in
//     the list, unless the family ranks paths by vendor);
//   * tests and benchmarks force a path with Family::select(name) ("auto"
//     returns to the CPU's best) to check that every path gives the same
//     results; Family::current() reports the path in use. Python sees them
//     as vflsec.kernels.kernel_isa() and the context manager
//     vflsec.kernels.force_isa() (over _core.kernel_isa() and
//     _core._select_kernel_isa(), its only way in).
//
// A kernel calls `table[family.index()](...)`: one relaxed atomic load and an
// indirect call per request, nothing per value. Forcing a path is meant for
// tests: it must not race with a running kernel of the same family.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

namespace vflsec::isa {

enum Feature : std::uint32_t {
    kAvx2 = 1u << 0,
    kFma = 1u << 1,
    kAvx512F = 1u << 2,
    kAvx512Dq = 1u << 3,
    kAvx512Vl = 1u << 4,
};

struct Cpu {
    std::uint32_t features = 0;  // Feature bits
    bool amd = false;
};

// The features of the CPU this process runs on, detected on first call.
inline const Cpu& cpu() {
    static const Cpu detected = [] {
        Cpu c;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx2")) c.features |= kAvx2;
        if (__builtin_cpu_supports("fma")) c.features |= kFma;
        if (__builtin_cpu_supports("avx512f")) c.features |= kAvx512F;
        if (__builtin_cpu_supports("avx512dq")) c.features |= kAvx512Dq;
        if (__builtin_cpu_supports("avx512vl")) c.features |= kAvx512Vl;
        c.amd = __builtin_cpu_is("amd");
#endif
        return c;
    }();
    return detected;
}

struct Path {
    const char* name;
    std::uint32_t needs;  // Feature bits the CPU must have
};

// The paths of one kernel family and the one in use. Paths are listed from
// the most portable (index 0, requiring nothing) to the most preferred;
// function tables are indexed like the list.
class Family {
public:
    // `prefer`: optional ranking hook, the path to use on `cpu` among the
    // supported ones (default: the last supported path in the list).
    template <int N>
    constexpr Family(const char* name, const Path (&paths)[N], int (*prefer)(const Family&, const Cpu&) = nullptr)
        : name_(name), paths_(paths), count_(N), prefer_(prefer) {}
    Family(const Family&) = delete;
    Family& operator=(const Family&) = delete;

    const char* name() const { return name_; }
    int size() const { return count_; }
    const char* path_name(int i) const { return paths_[i].name; }
    bool supported(int i) const { return (cpu().features & paths_[i].needs) == paths_[i].needs; }
    int find(const char* path) const {
        for (int i = 0; i < count_; ++i)
            if (std::strcmp(path, paths_[i].name) == 0) return i;
        return -1;
    }

    // The best path this CPU supports.
    int best() const {
        if (prefer_ != nullptr) return prefer_(*this, cpu());
        for (int i = count_ - 1; i > 0; --i)
            if (supported(i)) return i;
        return 0;
    }

    // The path in use: the best one unless a test forced another.
    int index() const {
        int i = chosen_.load(std::memory_order_relaxed);
        if (i < 0) {
            i = best();
            chosen_.store(i, std::memory_order_relaxed);
        }
        return i;
    }
    const char* current() const { return paths_[index()].name; }

    // Forces `path` ("auto": the CPU's best); returns the name of the path now
    // in use. Throws std::invalid_argument for an unknown path or one this CPU
    // lacks (the path in use is then unchanged).
    const char* select(const char* path) {
        if (std::strcmp(path, "auto") == 0) {
            chosen_.store(best(), std::memory_order_relaxed);
            return current();
        }
        const int i = find(path);
        if (i < 0) {
            std::string known = "auto";
            for (int k = 0; k < count_; ++k) known += std::string(", ") + paths_[k].name;
            throw std::invalid_argument("unknown ISA path '" + std::string(path) + "' of the " + name_ +
                                        " kernels; expected one of " + known);
        }
        if (!supported(i))
            throw std::invalid_argument("this CPU does not support the " + std::string(path) + " path of the " +
                                        name_ + " kernels");
        chosen_.store(i, std::memory_order_relaxed);
        return paths_[i].name;
    }

    // The entry of `table` (indexed like the paths) for the path in use.
    template <typename Fn>
    Fn pick(const Fn* table) const {
        return table[index()];
    }

private:
    const char* name_;
    const Path* paths_;
    int count_;
    int (*prefer_)(const Family&, const Cpu&);
    mutable std::atomic<int> chosen_{-1};
};

// The families, defined next to their kernels.
Family& noise_family();      // noise.cpp: ChaCha20 normals and raw words; lattice_gaussian.cpp: the release
Family& distances_family();  // distances.cpp: the distance tiles of distances_isa_*.cpp
Family& fcm_family();        // fcm.cpp: the fused fuzzy c-means pass

}  // namespace vflsec::isa
