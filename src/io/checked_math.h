// Overflow-checked integer arithmetic for sizes read from untrusted files.
#pragma once

#include <cstdint>

namespace mamba::io {

/// *out = a * b; false on overflow (then *out is unspecified).
template <class T>
inline bool checked_mul(T a, T b, T* out) { return !__builtin_mul_overflow(a, b, out); }
/// *out = a + b; false on overflow.
template <class T>
inline bool checked_add(T a, T b, T* out) { return !__builtin_add_overflow(a, b, out); }

}  // namespace mamba::io
