// Device discovery that never fails: a machine without a driver or GPU
// simply has 0 devices (vflsec.cuda_available() is False there).
#include "api.hpp"
#include "exec.cuh"

namespace vflsec::cuda {

int device_count() {
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess) {
        cudaGetLastError();  // clear the sticky status of this thread
        return 0;
    }
    return count;
}

int runtime_version() { return CUDART_VERSION; }

}  // namespace vflsec::cuda
