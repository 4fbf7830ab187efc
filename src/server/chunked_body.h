// ChunkedBodyDecoder: a request body sent with "Transfer-Encoding: chunked" (RFC 9112 §7.1), decoded
// as its bytes arrive, within bounds.
//
// cpp-httplib 0.11 decodes chunked bodies itself, but with no bound on the body (the server's
// payload limit is checked against Content-Length only), on a chunk-size line or on the trailer
// section: one client could grow the server without end. The server reads such a body through this
// decoder instead, a few bytes at a time from the connection's buffered stream (next_read_size()
// never asks for a byte past the body's end, so a pipelined request after it stays unread).
//
// Grammar accepted (RFC 9112 §7.1, strictly framed as the head is — HeadChecker):
//   chunked-body = *chunk last-chunk trailer-section CRLF
//   chunk        = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//   last-chunk   = 1*"0" [ chunk-ext ] CRLF
//   chunk-size   = 1*HEXDIG
//   chunk-ext    = anything up to the line's CRLF but CTLs (HTAB allowed): extensions are ignored,
//                  as RFC 9112 §7.1.1 lets a recipient do (kMaxExtensions bytes of them in all)
//   trailer-section = *( field-line CRLF ), field-line = token ":" value as in the head (no
//                  whitespace before the ':', no folded lines): read, bounded, and dropped
//                  (§7.1.2: a server may discard trailer fields; none of this API's requests has one)
// Every line ends CRLF: a bare LF or a CR not followed by LF is a fault (as in the head: a proxy
// that framed the body otherwise would let a second request hide in it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mamba::server {

class ChunkedBodyDecoder {
 public:
  /// Bytes of one chunk-size line, extensions and CRLF included.
  static constexpr std::size_t kMaxSizeLine = 4096;
  /// Bytes of the whole trailer section (its field lines and their CRLFs, not the final CRLF).
  static constexpr std::size_t kMaxTrailer = 8192;
  /// Bytes of all the chunk extensions of a body (no client sends any: 1-byte chunks each with a
  /// 4 KiB extension put 34 GB on the wire for an 8 MiB body).
  static constexpr std::size_t kMaxExtensions = 65536;

  /// `max_body_bytes`: bytes of decoded body (the chunks' data) accepted; a chunk whose size would
  /// take the body past it is refused as soon as its size line ends, before its data is read.
  explicit ChunkedBodyDecoder(std::size_t max_body_bytes) : max_body_(max_body_bytes) {}

  enum class State {
    kMore,      ///< the body is not whole yet: feed more bytes
    kDone,      ///< the body ended (the CRLF after the trailer section was read)
    kTooLarge,  ///< the chunks' data exceed max_body_bytes (an HTTP 413); error() says so
    kMalformed, ///< the framing is not the grammar above (an HTTP 400); error() says where
  };

  /// Consumes a prefix of `in`, appending the chunks' data to `body` (owned by the caller; bytes
  /// already appended stay when the decoder fails). Returns how many bytes of `in` it consumed:
  /// all of them while state() stays kMore, else up to the byte that ended the body or the one that
  /// made it fail (never a byte past the body's end). Feeding after kDone / a failure consumes none.
  std::size_t feed(std::string_view in, std::string& body);

  /// How many bytes the caller may read from the connection and feed next, sure that none of them
  /// lies past the body's end: ≥ 1 while state() is kMore (the rest of a chunk's data and its CRLF,
  /// else 1 byte of a line), 0 otherwise.
  std::size_t next_read_size() const;

  State state() const { return state_; }
  /// What went wrong, for an error message ("" while kMore / kDone), e.g. "chunk 3's size line
  /// 'zz' is not a hexadecimal number".
  const std::string& error() const { return error_; }
  /// Data bytes decoded so far (the body's size once kDone).
  std::uint64_t body_bytes() const { return body_bytes_; }
  /// Whether the last chunk (size 0) has been read: what is still to come is the trailer section
  /// and its final CRLF (for a message about a body that ended early).
  bool in_trailer() const { return part_ == Part::kTrailerLine || part_ == Part::kTrailerLf; }

 private:
  enum class Part {
    kSize,         ///< the chunk-size's hex digits
    kExtension,    ///< after the digits, up to the line's CR
    kSizeLf,       ///< the LF after a size line's CR
    kData,         ///< the chunk's data
    kDataCr,       ///< the CR after the data
    kDataLf,       ///< the LF after it
    kTrailerLine,  ///< within a trailer field line, or at the start of one / of the final CRLF
    kTrailerLf,    ///< the LF after a trailer line's CR
  };

  /// Consumes one byte of a line (any part but kData), failing or finishing the body where it must.
  void step(char c);
  void fail(State s, std::string what);

  std::size_t max_body_;
  State state_ = State::kMore;
  Part part_ = Part::kSize;
  std::string error_;
  std::uint64_t body_bytes_ = 0;
  std::uint64_t chunk_size_ = 0;    // the current chunk's size, as its line declares it
  std::uint64_t data_left_ = 0;     // kData: bytes of the chunk still to come
  std::size_t chunk_index_ = 1;     // 1 = the first chunk, for messages
  std::size_t line_bytes_ = 0;      // bytes of the current size line / trailer line so far
  std::size_t digits_ = 0;          // hex digits of the current size line
  std::size_t trailer_bytes_ = 0;   // bytes of the trailer section so far
  std::size_t extension_bytes_ = 0; // bytes of chunk extensions so far (from each ';' on)
  std::size_t trailer_line_ = 0;    // 1 = the first trailer line, for messages
  bool trailer_colon_ = false;      // the current trailer line's ':' was seen
  bool ext_begun_ = false;          // kExtension: its ';' was seen (before it only SP / HTAB)
};

}  // namespace mamba::server
