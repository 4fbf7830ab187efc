// Errors as values at the library boundary.
//
// Every fallible public function returns `Status` (no value) or `Result<T>`. An `Error` carries a
// category and a human-readable message that names the file / tensor / field involved and the
// expected vs actual value, e.g.
//   "model.safetensors: tensor 'backbone.layers.0.mixer.in_proj.weight': expected shape [128, 32], got [64, 32]".
// Library code never calls exit() and throws across the public API only for:
//  - memory: std::bad_alloc may come from any call that allocates (the Tensor constructors and
//    clone(), Model::new_state(), State::clone(), tokenizing, generating), as in the standard
//    library; Model::load instead returns kIo naming the weight buffer that did not fit;
//  - a broken precondition: Result::value() on an error throws std::bad_variant_access (check ok()
//    first); a Shape of more than kMaxDims dims throws std::length_error.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace mamba {

/// Broad category of an error; the message carries the detail.
enum class ErrorCode : std::uint8_t {
  kInvalidArgument,  ///< a caller-supplied value is out of range (e.g. top_p = 2)
  kNotFound,         ///< a file, tensor, config key or cached repo is missing
  kIo,               ///< the OS refused a read / mmap / open, memory or a thread
  kFormat,           ///< a file is malformed (truncated, bad header, bad pickle, bad JSON)
  kShape,            ///< a tensor's dtype or shape disagrees with the config
  kUnsupported,      ///< well-formed input that this build does not implement (named)
  kNumerical,        ///< NaN / Inf detected where a finite value is required
  kInternal,         ///< a bug in mamba.cpp
};

/// Short lower-case name of an ErrorCode ("invalid_argument", "not_found", ...).
const char* error_code_name(ErrorCode code);

/// An error: category + message. The message is complete on its own (no need to add context).
struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
};

/// Builds an Error with a message; use fmt::format for the message.
inline Error make_error(ErrorCode code, std::string message) { return Error{code, std::move(message)}; }

/// Success or an Error. Default-constructed = success.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error e) : error_(std::move(e)), ok_(false) {}  // NOLINT: implicit by design
  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  /// Precondition: !ok().
  const Error& error() const { return error_; }
  const std::string& message() const { return error_.message; }

 private:
  Error error_;
  bool ok_ = true;
};

/// A value of type T or an Error.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error e) : v_(std::move(e)) {}      // NOLINT: implicit by design
  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }
  /// Precondition: ok().
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  /// On a temporary (`*f()`): the value, moved out — by value, so `for (auto x : *f())` and
  /// `auto&& v = *f();` keep it alive (a reference would dangle).
  T operator*() && { return std::move(*this).value(); }
  /// Precondition: !ok().
  const Error& error() const { return std::get<1>(v_); }
  Status status() const { return ok() ? Status() : Status(error()); }

 private:
  std::variant<T, Error> v_;
};

}  // namespace mamba

/// Propagates a failed Status/Result from the enclosing function.
#define MAMBA_RETURN_IF_ERROR(expr)               \
  do {                                            \
    auto&& mamba_status_ = (expr);                \
    if (!mamba_status_.ok()) return mamba_status_.error(); \
  } while (0)

#define MAMBA_CONCAT_INNER_(a, b) a##b
#define MAMBA_CONCAT_(a, b) MAMBA_CONCAT_INNER_(a, b)
/// `MAMBA_ASSIGN_OR_RETURN(auto x, f());` — binds the value of a Result or returns its error.
#define MAMBA_ASSIGN_OR_RETURN(lhs, expr) \
  MAMBA_ASSIGN_OR_RETURN_IMPL_(MAMBA_CONCAT_(mamba_result_, __LINE__), lhs, expr)
#define MAMBA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.error();                 \
  lhs = std::move(tmp).value()
