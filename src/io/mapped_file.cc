#include "io/mapped_file.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace mamba::io {

Result<std::shared_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  // O_NONBLOCK: a FIFO in place of a file (e.g. a shard) would block the open until a writer came;
  // it is refused below as not a regular file. (A regular file ignores the flag.)
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT) {
      if (auto dangling = dangling_link_error(path)) return *dangling;
    }
    return make_error(e == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                      fmt::format("{}: cannot open: {}", path, std::strerror(e)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return make_error(ErrorCode::kIo, fmt::format("{}: fstat failed: {}", path, std::strerror(e)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(ErrorCode::kIo, fmt::format("{}: not a regular file", path));
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<std::size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return make_error(ErrorCode::kIo, fmt::format("{}: mmap of {} bytes failed: {}", path, f->size_, std::strerror(e)));
    }
    f->data_ = static_cast<const std::uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::uint8_t*>(data_), size_);
}

std::optional<Error> dangling_link_error(const std::string& path) {
  struct stat lst {};
  struct stat st {};
  char target[4096];
  if (::lstat(path.c_str(), &lst) != 0 || !S_ISLNK(lst.st_mode) || ::stat(path.c_str(), &st) == 0 || errno != ENOENT)
    return std::nullopt;
  const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
  if (n < 0) return std::nullopt;
  return make_error(ErrorCode::kNotFound, fmt::format("{}: a symbolic link to {}, which does not exist (an interrupted download? "
                                                      "fetch the file again)", path, std::string(target, static_cast<std::size_t>(n))));
}

Result<std::string> read_text_file(const std::string& path) {
  struct stat dst {};
  if (::stat(path.c_str(), &dst) != 0) {
    const int e = errno;  // ENOENT (also a dangling link), ELOOP (a link loop), EACCES, ...
    if (e == ENOENT) return make_error(ErrorCode::kNotFound, fmt::format("{}: no such file", path));
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot read: {}", path, std::strerror(e)));
  }
  if (S_ISDIR(dst.st_mode))
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: is a directory, not a file", path));
  // A FIFO or device would block the open or never end (a config.json FIFO hung `inspect`).
  if (!S_ISREG(dst.st_mode)) return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: is not a regular file", path));
  if (::access(path.c_str(), R_OK) != 0)  // e.g. EACCES, which std::ifstream would not name
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return make_error(ErrorCode::kNotFound, fmt::format("{}: no such file", path));
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot open for reading", path));
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return make_error(ErrorCode::kIo, fmt::format("{}: read error", path));
  return ss.str();
}

}  // namespace mamba::io
