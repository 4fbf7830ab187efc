#include "server/chunked_body.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string_view>

namespace mamba::server {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// A control character other than HTAB (RFC 9110 §5.5: not allowed in field values).
bool is_ctl(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u < 0x20 && c != '\t') || u == 0x7f;
}

/// A token character of a field name (RFC 9110 §5.6.2).
bool is_tchar(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= '0' && u <= '9') return true;
  if ((u | 0x20) >= 'a' && (u | 0x20) <= 'z') return true;
  return c != '\0' && std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

/// A byte as a message shows it: printable ASCII as is, else its hex code.
std::string shown_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (u >= 0x20 && u < 0x7f) return fmt::format("'{}'", c);
  return fmt::format("byte 0x{:02x}", u);
}

}  // namespace

void ChunkedBodyDecoder::fail(State s, std::string what) {
  state_ = s;
  error_ = std::move(what);
}

std::size_t ChunkedBodyDecoder::next_read_size() const {
  if (state_ != State::kMore) return 0;
  switch (part_) {
    case Part::kData: return data_left_ > std::numeric_limits<std::size_t>::max() - 2 ? std::numeric_limits<std::size_t>::max()
                                                                                       : static_cast<std::size_t>(data_left_) + 2;
    case Part::kDataCr: return 2;
    default: return 1;  // a line's bytes: its end is not known before it comes
  }
}

std::size_t ChunkedBodyDecoder::feed(std::string_view in, std::string& body) {
  std::size_t used = 0;
  while (used < in.size() && state_ == State::kMore) {
    if (part_ == Part::kData) {
      const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(data_left_, in.size() - used));
      body.append(in.data() + used, n);
      used += n;
      data_left_ -= n;
      body_bytes_ += n;
      if (data_left_ == 0) part_ = Part::kDataCr;
      continue;
    }
    step(in[used++]);
  }
  return used;
}

void ChunkedBodyDecoder::step(char c) {
  const auto bare_lf = [&](const char* where) {
    fail(State::kMalformed, fmt::format("a bare LF (without CR) ends {} of chunk {}: lines of a chunked body end CRLF", where, chunk_index_));
  };
  switch (part_) {
    case Part::kSize:
    case Part::kExtension: {
      if (++line_bytes_ > kMaxSizeLine)
        return fail(State::kMalformed, fmt::format("chunk {}'s size line is longer than {} bytes", chunk_index_, kMaxSizeLine));
      if (c == '\r') {
        if (digits_ == 0)
          return fail(State::kMalformed, fmt::format("chunk {}'s size line has no size (hexadecimal digits)", chunk_index_));
        part_ = Part::kSizeLf;
        return;
      }
      if (c == '\n') return bare_lf("the size line");
      if (part_ == Part::kSize) {
        if (const int v = hex_value(c); v >= 0) {
          ++digits_;
          // Past what the limit leaves (checked per digit: no overflow, and a 20-digit size is
          // refused at its first digit over).
          const std::uint64_t left = max_body_ - std::min<std::uint64_t>(max_body_, body_bytes_);
          chunk_size_ = chunk_size_ * 16 + static_cast<std::uint64_t>(v);
          if (chunk_size_ > left)
            return fail(State::kTooLarge, fmt::format("the chunked request body exceeds {} bytes (chunk {} declares more "
                                                      "than the {} bytes left)", max_body_, chunk_index_, left));
          return;
        }
        if (digits_ == 0)
          return fail(State::kMalformed, fmt::format("chunk {}'s size line begins with {}, not a hexadecimal digit", chunk_index_, shown_byte(c)));
        if (c != ';' && c != ' ' && c != '\t')
          return fail(State::kMalformed, fmt::format("chunk {}'s size is followed by {} (expected CRLF or a ';' extension)",
                                                     chunk_index_, shown_byte(c)));
        part_ = Part::kExtension;
        ext_begun_ = c == ';';
        if (ext_begun_) ++extension_bytes_;
        return;
      }
      // an extension, or the whitespace before its ';' (BWS)
      if (ext_begun_ && ++extension_bytes_ > kMaxExtensions)
        return fail(State::kMalformed, fmt::format("the chunked body's chunk extensions are longer than {} bytes in all", kMaxExtensions));
      if (is_ctl(c))
        return fail(State::kMalformed, fmt::format("chunk {}'s size line holds control character 0x{:02x}", chunk_index_,
                                                   static_cast<unsigned char>(c)));
      if (!ext_begun_) {
        if (c == ';') ext_begun_ = true;
        else if (c != ' ' && c != '\t')
          return fail(State::kMalformed, fmt::format("chunk {}'s size is followed by {} (expected CRLF or a ';' extension)",
                                                     chunk_index_, shown_byte(c)));
      }
      return;
    }
    case Part::kSizeLf:
      if (c != '\n') return fail(State::kMalformed, fmt::format("chunk {}'s size line has a CR not followed by LF", chunk_index_));
      if (++line_bytes_ > kMaxSizeLine)  // (the CR was counted; the LF too)
        return fail(State::kMalformed, fmt::format("chunk {}'s size line is longer than {} bytes", chunk_index_, kMaxSizeLine));
      line_bytes_ = 0;
      trailer_line_ = 1;
      trailer_colon_ = false;
      if (chunk_size_ == 0) {
        part_ = Part::kTrailerLine;  // the last chunk
      } else {
        data_left_ = chunk_size_;
        part_ = Part::kData;
      }
      return;
    case Part::kDataCr:
      if (c != '\r')
        return fail(State::kMalformed, fmt::format("chunk {}'s data is not followed by CRLF after the {} bytes its size line "
                                                   "declares ({} there): the data is longer or shorter than declared",
                                                   chunk_index_, chunk_size_, shown_byte(c)));
      part_ = Part::kDataLf;
      return;
    case Part::kDataLf:
      if (c != '\n') return fail(State::kMalformed, fmt::format("chunk {}'s data is followed by a CR without LF", chunk_index_));
      ++chunk_index_;
      part_ = Part::kSize;
      chunk_size_ = 0;
      digits_ = 0;
      line_bytes_ = 0;
      return;
    case Part::kTrailerLine:
      if (c == '\r') {
        if (line_bytes_ > 0 && !trailer_colon_)
          return fail(State::kMalformed, fmt::format("trailer line {} of the chunked body has no ':' (a field line is NAME: VALUE)", trailer_line_));
        part_ = Part::kTrailerLf;
        return;
      }
      if (c == '\n') {
        fail(State::kMalformed, "a bare LF (without CR) ends a trailer line of the chunked body: lines of a chunked body end CRLF");
        return;
      }
      if (is_ctl(c))
        return fail(State::kMalformed, fmt::format("a trailer line of the chunked body holds control character 0x{:02x}",
                                                   static_cast<unsigned char>(c)));
      if (!trailer_colon_) {  // the field name: a token, then ':' (as HeadChecker reads a header line)
        if (c == ':') {
          if (line_bytes_ == 0)
            return fail(State::kMalformed, fmt::format("trailer line {} of the chunked body has no field name before its ':'", trailer_line_));
          trailer_colon_ = true;
        } else if (!is_tchar(c)) {
          return fail(State::kMalformed, fmt::format("trailer line {} of the chunked body has {} in its field name{}", trailer_line_,
                                                     shown_byte(c), line_bytes_ == 0 ? " (a folded line)" : ""));
        }
      }
      ++line_bytes_;
      if (++trailer_bytes_ > kMaxTrailer)
        return fail(State::kMalformed, fmt::format("the chunked body's trailer section is longer than {} bytes", kMaxTrailer));
      return;
    case Part::kTrailerLf:
      if (c != '\n') return fail(State::kMalformed, "a trailer line of the chunked body has a CR not followed by LF");
      if (line_bytes_ == 0) {
        state_ = State::kDone;  // the empty line that ends the body
        return;
      }
      trailer_bytes_ += 2;
      line_bytes_ = 0;
      ++trailer_line_;
      trailer_colon_ = false;
      part_ = Part::kTrailerLine;
      return;
    case Part::kData: return;  // fed in bulk by feed()
  }
}

}  // namespace mamba::server
