// The one secure-wipe helper of the C++ and CUDA code: zeroes key material,
// keystream words and noise copies through volatile stores, which the
// compiler cannot elide (a memset of memory that is dead afterwards can be).
#pragma once

#include <cstddef>

namespace vflsec {

inline void secure_zero(void* p, std::size_t n) {
    volatile unsigned char* q = static_cast<volatile unsigned char*>(p);
    while (n--) *q++ = 0;
}

}  // namespace vflsec
