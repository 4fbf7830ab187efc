// Tensors: element types, a non-owning view, and an owning buffer.
//
// Layout convention everywhere in mamba.cpp: row-major, outermost dimension first (a PyTorch
// weight `[out_features, in_features]` is shape {out, in}, element (o, i) at o*in + i). Strides are
// in ELEMENTS, not bytes. Views never own memory: the storage (an mmapped file, a `Tensor`, a
// device buffer) must outlive every view of it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <string>

namespace mamba {

/// Element type of stored or computed data. Numbering is internal (not a file format).
enum class DType : std::uint8_t { kF32, kBF16, kF16, kF64, kI64, kI32, kI16, kI8, kU8, kBool, kQ8, kQ4 };

/// Bytes per element (kQ8 = 1, kQ4 = 0 meaning "packed, two per byte": use dtype_bytes()).
std::size_t dtype_size(DType t);
/// Bytes that `n` elements occupy (handles packed types).
std::size_t dtype_bytes(DType t, std::size_t n);
/// Safetensors-style name: "F32", "BF16", "F16", "F64", "I64", ...
const char* dtype_name(DType t);

/// Maximum rank of a TensorView.
inline constexpr int kMaxDims = 4;

/// Shape of up to kMaxDims dimensions, outermost first.
struct Shape {
  std::array<std::int64_t, kMaxDims> dims{};
  int rank = 0;

  Shape() = default;
  /// The dims, outermost first (any values: a view's shape is checked where it is used). More than
  /// kMaxDims values is a programming error: throws std::length_error (the checkpoint loaders
  /// refuse a deeper tensor with an error naming it before building a Shape).
  Shape(std::initializer_list<std::int64_t> d);
  std::int64_t operator[](int i) const { return dims[static_cast<std::size_t>(i)]; }
  std::int64_t& operator[](int i) { return dims[static_cast<std::size_t>(i)]; }
  /// Product of dims (1 for rank 0).
  std::int64_t numel() const;
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  /// "[128, 32]"
  std::string str() const;
};

/// Where a buffer lives. Every buffer today is kCpu (the CPU backend); kCuda is reserved for the
/// CUDA backend, which does not exist yet (-DMAMBA_CUDA=ON builds the CPU engine).
enum class Device : std::uint8_t { kCpu, kCuda };

/// Non-owning view: pointer + dtype + shape + strides (elements). Default strides are contiguous
/// row-major. `data` may point into an mmapped read-only file: never write through a view of a
/// checkpoint.
struct TensorView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  Shape shape;
  std::array<std::int64_t, kMaxDims> strides{};  // elements
  Device device = Device::kCpu;
  // Quantized weights (dtype kQ8 / kQ4, written by `mamba-cli quantize`; layout in README
  // §"Quantized weights"). `shape` is the LOGICAL [N, K]; `data` holds the codes (kQ8: int8 [N, K];
  // kQ4: uint8 [N, K/2], byte k/2 of a row holds k even in its low nibble, k odd in its high one,
  // code = q + 8 for q ∈ [−8, 7]); `scales` holds one scale per group of `group_size` consecutive
  // weights along K ([N, K / group_size], dtype `scale_dtype` F32 or F16). Weight (n, k) =
  // scale[n, k / group_size] · q[n, k]. Unused (nullptr / 0) for every other dtype.
  const void* scales = nullptr;
  DType scale_dtype = DType::kF32;
  int group_size = 0;
  // A backend's repacked copy of this weight, owned by whoever packed it (the model); nullptr: the
  // kernels read `data` / `scales`. Quantized: codes and scales in the layout the fastest kernel
  // reads (ops::pack_weight_to, same results); float: the bf16 precision tier's copy (ops::pack_weight_bf16_to,
  // which also selects that tier's arithmetic for this weight).
  const void* packed = nullptr;
  // Quantized weights: `packed` (then non-null) also holds the int8 precision tier's group sums
  // after the blocked codes (ops::pack_weight_int8_to), which selects that tier's arithmetic (8-bit
  // activations) for this weight.
  bool int8_tier = false;

  TensorView() = default;
  /// Contiguous view of `shape` at `data`.
  TensorView(void* data, DType dtype, Shape shape, Device device = Device::kCpu);

  std::int64_t numel() const { return shape.numel(); }
  std::size_t nbytes() const { return dtype_bytes(dtype, static_cast<std::size_t>(numel())); }
  bool is_contiguous() const;
  bool empty() const { return data == nullptr; }
  template <class T> T* as() const { return static_cast<T*>(data); }
  /// Row `i` of the outermost dimension as a view of rank-1 (contiguous views only).
  TensorView row(std::int64_t i) const;
};

/// Owning, 64-byte aligned CPU buffer with a shape; movable, not copyable (use clone()).
class Tensor {
 public:
  Tensor() = default;
  /// Zero-initialised tensor. Throws std::bad_alloc when out of memory.
  Tensor(DType dtype, Shape shape);
  /// Uninitialised tensor (the caller writes every byte) on 2 MiB-aligned memory advised for
  /// transparent huge pages (madvise MADV_HUGEPAGE; a no-op where THP is off): for large buffers
  /// written once and then streamed, e.g. packed weights — far fewer page faults while filling
  /// (a 4 KiB-page memset of 142 MB took ~0.4 s on a VM) and fewer TLB misses while reading.
  /// Throws std::bad_alloc when out of memory.
  static Tensor uninitialized_huge(DType dtype, Shape shape);
  Tensor(Tensor&&) noexcept = default;
  Tensor& operator=(Tensor&&) noexcept = default;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  TensorView view() const { return view_; }
  DType dtype() const { return view_.dtype; }
  const Shape& shape() const { return view_.shape; }
  std::int64_t numel() const { return view_.numel(); }
  std::size_t nbytes() const { return view_.nbytes(); }
  template <class T> T* data() const { return static_cast<T*>(view_.data); }
  /// A deep copy (same dtype, shape and bytes, on a new buffer). Throws std::bad_alloc when out of memory.
  Tensor clone() const;

 private:
  struct Free { void operator()(void* p) const; };
  std::unique_ptr<void, Free> storage_;
  TensorView view_;
};

// ---- scalar conversions (round-to-nearest-even, as PyTorch) -------------------------------------

inline float bf16_to_f32(std::uint16_t h) {
  std::uint32_t u = static_cast<std::uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline std::uint16_t f32_to_bf16(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // NaN stays NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
/// IEEE half → float (handles subnormals, Inf, NaN).
float f16_to_f32(std::uint16_t h);
/// float → IEEE half, round-to-nearest-even.
std::uint16_t f32_to_f16(float f);

/// Converts `n` elements of `src` (F32/BF16/F16) to float. Other dtypes: returns false.
bool convert_to_f32(const void* src, DType dtype, std::size_t n, float* dst);

}  // namespace mamba
