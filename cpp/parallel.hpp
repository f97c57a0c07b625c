// Thread-count control shared by every kernel. OpenMP reads OMP_NUM_THREADS at
// start-up; set_num_threads overrides it for the rest of the process.
#pragma once
#include <omp.h>

namespace vflsec {

inline int num_threads() { return omp_get_max_threads(); }

}  // namespace vflsec
