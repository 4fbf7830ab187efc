// Zip archive directory reader (PKWARE APPNOTE 6.3: end of central directory, zip64, local headers),
// enough for torch.save archives: entries are located in the mapped file, never decompressed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mamba/status.h"

namespace mamba::io {

struct ZipEntry {
  std::string name;
  std::uint16_t method = 0;            ///< 0 = stored; anything else is compressed (not supported for data)
  std::uint64_t compressed_size = 0;
  std::uint64_t size = 0;              ///< uncompressed size
  std::uint64_t data_offset = 0;       ///< absolute offset of the entry's bytes in the archive
};

/// Reads the central directory of the archive held in `bytes[0, size)` and locates each entry's data
/// through its local header. Every offset and size is checked against `size`. `source` prefixes
/// errors. Errors: kFormat (not a zip, truncated, offsets out of range), kUnsupported (encrypted,
/// multi-disk).
Result<std::vector<ZipEntry>> parse_zip_directory(const std::uint8_t* bytes, std::size_t size, const std::string& source);

}  // namespace mamba::io
