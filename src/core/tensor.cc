#include "mamba/tensor.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <fmt/format.h>

namespace mamba {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kF64: case DType::kI64: return 8;
    case DType::kF32: case DType::kI32: return 4;
    case DType::kBF16: case DType::kF16: case DType::kI16: return 2;
    case DType::kI8: case DType::kU8: case DType::kBool: case DType::kQ8: return 1;
    case DType::kQ4: return 0;
  }
  return 0;
}

std::size_t dtype_bytes(DType t, std::size_t n) {
  if (t == DType::kQ4) return (n + 1) / 2;
  return dtype_size(t) * n;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kF32: return "F32";
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kF64: return "F64";
    case DType::kI64: return "I64";
    case DType::kI32: return "I32";
    case DType::kI16: return "I16";
    case DType::kI8: return "I8";
    case DType::kU8: return "U8";
    case DType::kBool: return "BOOL";
    case DType::kQ8: return "Q8";
    case DType::kQ4: return "Q4";
  }
  return "?";
}

Shape::Shape(std::initializer_list<std::int64_t> d) {
  if (d.size() > static_cast<std::size_t>(kMaxDims))  // a programming error, not input: the loaders check ranks first
    throw std::length_error(fmt::format("Shape: {} dimensions, at most {}", d.size(), kMaxDims));
  for (auto v : d) dims[static_cast<std::size_t>(rank++)] = v;
}

std::int64_t Shape::numel() const {
  std::int64_t n = 1;
  for (int i = 0; i < rank; ++i) n *= dims[static_cast<std::size_t>(i)];
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (rank != o.rank) return false;
  for (int i = 0; i < rank; ++i)
    if (dims[static_cast<std::size_t>(i)] != o.dims[static_cast<std::size_t>(i)]) return false;
  return true;
}

std::string Shape::str() const {
  std::string s = "[";
  for (int i = 0; i < rank; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims[static_cast<std::size_t>(i)]);
  }
  return s + "]";
}

TensorView::TensorView(void* d, DType t, Shape s, Device dev) : data(d), dtype(t), shape(s), device(dev) {
  std::int64_t st = 1;
  for (int i = shape.rank - 1; i >= 0; --i) {
    strides[static_cast<std::size_t>(i)] = st;
    st *= shape[i];
  }
}

bool TensorView::is_contiguous() const {
  std::int64_t st = 1;
  for (int i = shape.rank - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[static_cast<std::size_t>(i)] != st) return false;
    st *= shape[i];
  }
  return true;
}

TensorView TensorView::row(std::int64_t i) const {
  Shape s;
  s.rank = shape.rank - 1;
  for (int k = 1; k < shape.rank; ++k) s[k - 1] = shape[k];
  auto* base = static_cast<char*>(data) + dtype_bytes(dtype, static_cast<std::size_t>(i * strides[0]));
  return TensorView(base, dtype, s, device);
}

void Tensor::Free::operator()(void* p) const { std::free(p); }

Tensor::Tensor(DType dtype, Shape shape) {
  std::size_t bytes = dtype_bytes(dtype, static_cast<std::size_t>(shape.numel()));
  std::size_t alloc = (bytes + 63) / 64 * 64;
  if (alloc == 0) alloc = 64;
  void* p = std::aligned_alloc(64, alloc);
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, alloc);
  storage_.reset(p);
  view_ = TensorView(p, dtype, shape);
}

Tensor Tensor::uninitialized_huge(DType dtype, Shape shape) {
  constexpr std::size_t kHuge = std::size_t{2} << 20;
  const std::size_t bytes = dtype_bytes(dtype, static_cast<std::size_t>(shape.numel()));
  const std::size_t alloc = std::max<std::size_t>(kHuge, (bytes + kHuge - 1) / kHuge * kHuge);
  void* p = std::aligned_alloc(kHuge, alloc);
  if (!p) throw std::bad_alloc();
  // Advice only: without transparent huge pages (or with THP "never") this is a no-op.
  (void)madvise(p, alloc, MADV_HUGEPAGE);
  Tensor t;
  t.storage_.reset(p);
  t.view_ = TensorView(p, dtype, shape);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(view_.dtype, view_.shape);
  if (view_.data) std::memcpy(t.view_.data, view_.data, nbytes());
  return t;
}

float f16_to_f32(std::uint16_t h) {
  std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  std::uint32_t exp = (h >> 10) & 0x1fu;
  std::uint32_t man = h & 0x3ffu;
  std::uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do { ++e; man <<= 1; } while ((man & 0x400u) == 0);
      u = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::uint16_t f32_to_f16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  std::uint32_t sign = (u >> 16) & 0x8000u;
  std::uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  if (absu >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow → Inf
  if (absu < 0x38800000u) {  // subnormal half or zero
    if (absu < 0x33000000u) return static_cast<std::uint16_t>(sign);
    std::uint32_t e = absu >> 23;
    std::uint32_t m = (absu & 0x7fffffu) | 0x800000u;
    std::uint32_t shift = 126 - e;  // 113 - e + 13
    std::uint32_t half_m = m >> shift;
    std::uint32_t rem = m & ((1u << shift) - 1);
    std::uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (half_m & 1u))) ++half_m;
    return static_cast<std::uint16_t>(sign | half_m);
  }
  std::uint32_t r = absu + 0xfffu + ((absu >> 13) & 1u);  // round to nearest even at bit 13
  r -= (112u << 23);
  return static_cast<std::uint16_t>(sign | (r >> 13));
}

bool convert_to_f32(const void* src, DType dtype, std::size_t n, float* dst) {
  switch (dtype) {
    case DType::kF32: std::memcpy(dst, src, n * 4); return true;
    case DType::kBF16: {
      auto* s = static_cast<const std::uint16_t*>(src);
      for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return true;
    }
    case DType::kF16: {
      auto* s = static_cast<const std::uint16_t*>(src);
      for (std::size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return true;
    }
    default: return false;
  }
}

}  // namespace mamba
