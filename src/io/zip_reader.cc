#include "io/zip_reader.h"

#include <fmt/format.h>

#include "io/checked_math.h"

namespace mamba::io {
namespace {

constexpr std::uint32_t kEocdSig = 0x06054b50, kZip64EocdSig = 0x06064b50, kZip64LocatorSig = 0x07064b50;
constexpr std::uint32_t kCentralSig = 0x02014b50, kLocalSig = 0x04034b50;

std::uint64_t rd(const std::uint8_t* p, int n) {
  std::uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

Result<std::vector<ZipEntry>> parse_zip_directory(const std::uint8_t* bytes, std::size_t size, const std::string& source) {
  auto fail = [&](const std::string& what) { return make_error(ErrorCode::kFormat, fmt::format("{}: zip archive: {}", source, what)); };
  if (size < 22) return fail(fmt::format("file of {} bytes is too small to be a zip archive (truncated?)", size));
  // End of central directory: the last 22 + comment (≤ 65535) bytes.
  std::size_t eocd = size;
  const std::size_t lowest = size > 22 + 65535 ? size - 22 - 65535 : 0;
  for (std::size_t p = size - 22 + 1; p-- > lowest;) {
    if (rd(bytes + p, 4) == kEocdSig && p + 22 + rd(bytes + p + 20, 2) <= size) {
      eocd = p;
      break;
    }
  }
  if (eocd == size) return fail("no end-of-central-directory record (not a zip file, or truncated)");
  const std::uint8_t* e = bytes + eocd;
  if (rd(e + 4, 2) != 0 || (rd(e + 6, 2) != 0 && rd(e + 6, 2) != 0xFFFF)) return make_error(ErrorCode::kUnsupported, fmt::format("{}: multi-disk zip archives are not supported", source));
  std::uint64_t n_entries = rd(e + 10, 2), cd_size = rd(e + 12, 4), cd_offset = rd(e + 16, 4);
  if (n_entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {
    if (eocd < 20 || rd(bytes + eocd - 20, 4) != kZip64LocatorSig) return fail("zip64 markers without a zip64 end-of-central-directory locator");
    const std::uint64_t z64 = rd(bytes + eocd - 20 + 8, 8);
    if (z64 > size || size - z64 < 56 || rd(bytes + z64, 4) != kZip64EocdSig) return fail(fmt::format("zip64 end-of-central-directory record at {} is missing or out of range", z64));
    n_entries = rd(bytes + z64 + 32, 8);
    cd_size = rd(bytes + z64 + 40, 8);
    cd_offset = rd(bytes + z64 + 48, 8);
  }
  std::uint64_t cd_end = 0;
  if (!checked_add(cd_offset, cd_size, &cd_end) || cd_end > size) {
    return fail(fmt::format("central directory [{}, +{}) runs past the end of the file ({} bytes)", cd_offset, cd_size, size));
  }
  if (n_entries > cd_size / 46) return fail(fmt::format("{} entries cannot fit in a central directory of {} bytes", n_entries, cd_size));
  std::vector<ZipEntry> out;
  out.reserve(static_cast<std::size_t>(n_entries));
  std::uint64_t p = cd_offset;
  for (std::uint64_t i = 0; i < n_entries; ++i) {
    if (cd_end - p < 46 || rd(bytes + p, 4) != kCentralSig) return fail(fmt::format("central directory entry {} at offset {} is malformed", i, p));
    const std::uint8_t* c = bytes + p;
    const std::uint64_t flags = rd(c + 8, 2), name_len = rd(c + 28, 2), extra_len = rd(c + 30, 2), comment_len = rd(c + 32, 2);
    if (cd_end - p - 46 < name_len + extra_len + comment_len) return fail(fmt::format("central directory entry {} runs past the directory", i));
    ZipEntry z;
    z.name.assign(reinterpret_cast<const char*>(c + 46), name_len);
    z.method = static_cast<std::uint16_t>(rd(c + 10, 2));
    z.compressed_size = rd(c + 20, 4);
    z.size = rd(c + 24, 4);
    std::uint64_t local = rd(c + 42, 4);
    if (flags & 1) return make_error(ErrorCode::kUnsupported, fmt::format("{}: zip entry '{}' is encrypted", source, z.name));
    // zip64 extended information extra field (id 0x0001): only the fields whose 32-bit value is 0xFFFFFFFF.
    const std::uint8_t* x = c + 46 + name_len;
    const std::uint8_t* x_end = x + extra_len;
    while (x_end - x >= 4) {
      const std::uint64_t id = rd(x, 2), len = rd(x + 2, 2);
      if (static_cast<std::uint64_t>(x_end - x - 4) < len) break;
      if (id == 1) {
        const std::uint8_t* f = x + 4;
        std::uint64_t left = len;
        auto take = [&](std::uint64_t& field) -> bool {
          if (field != 0xFFFFFFFF) return true;
          if (left < 8) return false;
          field = rd(f, 8);
          f += 8;
          left -= 8;
          return true;
        };
        if (!take(z.size) || !take(z.compressed_size) || !take(local)) return fail(fmt::format("entry '{}': truncated zip64 extra field", z.name));
      }
      x += 4 + len;
    }
    // Local header: its own name/extra lengths decide where the data starts.
    if (local > size || size - local < 30 || rd(bytes + local, 4) != kLocalSig) {
      return fail(fmt::format("entry '{}': local header at offset {} is missing or out of range", z.name, local));
    }
    const std::uint64_t data = local + 30 + rd(bytes + local + 26, 2) + rd(bytes + local + 28, 2);
    std::uint64_t data_end = 0;
    if (data > size || !checked_add(data, z.compressed_size, &data_end) || data_end > size) {
      return fail(fmt::format("entry '{}': data [{}, +{}) runs past the end of the file ({} bytes; truncated?)", z.name, data, z.compressed_size, size));
    }
    if (z.method == 0 && z.compressed_size != z.size) {
      return fail(fmt::format("stored entry '{}': compressed size {} ≠ size {}", z.name, z.compressed_size, z.size));
    }
    z.data_offset = data;
    out.push_back(std::move(z));
    p += 46 + name_len + extra_len + comment_len;
  }
  return out;
}

}  // namespace mamba::io
