// Device discovery that never fails: a machine without a driver or GPU
// simply has 0 devices (vflsec.cuda_available() is False there).
#include "api.hpp"
#include "exec.cuh"

#include <string>

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

std::string device_status() {
    int count = 0;
    const cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess) {
        cudaGetLastError();
        return std::string(cudaGetErrorName(status)) + ": " + cudaGetErrorString(status);
    }
    return std::to_string(count) + " CUDA device(s)";
}

}  // namespace vflsec::cuda
