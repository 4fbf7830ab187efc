// MappedFile: a whole file mapped read-only into memory (mmap), shared by the tensor views into it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "mamba/status.h"

namespace mamba::io {

/// A read-only, private mapping of one file. Not copyable; share it through std::shared_ptr.
/// The bytes stay valid until the last owner releases it. Empty files map to size() == 0.
class MappedFile {
 public:
  /// Maps `path` read-only. Errors: kNotFound (no such file), kIo (open/fstat/mmap refused).
  static Result<std::shared_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  std::string path_;
};

/// Reads a whole (small) regular text file, e.g. config.json. Errors: kNotFound, kInvalidArgument
/// (a directory, or not a regular file: a FIFO would block), kIo (with errno's reason, e.g. a
/// symbolic-link loop).
Result<std::string> read_text_file(const std::string& path);

/// When `path` is a symbolic link whose target does not exist (what an interrupted download leaves
/// in a Hugging Face cache snapshot), the kNotFound error naming the link and its target; nullopt
/// otherwise (not a link, the target exists, or the link cannot be read).
std::optional<Error> dangling_link_error(const std::string& path);

}  // namespace mamba::io
