// HeadChecker: a request head (request line and header lines, RFC 9112 §2–5) checked byte by byte
// as it arrives, for the bounds and the header-line faults cpp-httplib 0.11 would not catch.
//
// Used twice per head: by the stream cpp-httplib reads the head through (BoundedHttpServer: a fault
// ends the head where it is, and the error handler answers it), and on the bytes of a parked
// connection's head as they arrive (ConnectionParking), to hand the connection to a worker as soon
// as reading the head would not wait — the head is whole, or a check fails (the worker's own
// checker then fails at the same byte), or the request line is one cpp-httplib refuses.
#pragma once

#include <cstddef>
#include <string>

namespace mamba::server {

/// What ended the head of a request early.
enum class HeadFault {
  kNone,
  kLineTooLong,    ///< one line over kMaxHeadLine + 1 bytes (cpp-httplib answers 414 or 400 itself)
  kTooLong,        ///< the whole head over its bound (answered 431)
  kMalformedLine,  ///< a header line cpp-httplib would skip or misread (fault_what() says how)
  kIncomplete,     ///< no blank line within the head timeout, or the client closed before it
};

class HeadChecker {
 public:
  /// Bytes of one line of the head, CRLF included, cpp-httplib accepts (its
  /// CPPHTTPLIB_REQUEST_URI_MAX_LENGTH and CPPHTTPLIB_HEADER_MAX_LENGTH).
  static constexpr std::size_t kMaxHeadLine = 8192;

  /// `max_head`: bytes of the whole head (request line and header lines, CRLFs included).
  explicit HeadChecker(std::size_t max_head) : max_head_(max_head) {}

  /// A new head begins with the next byte.
  void reset();

  enum class Step {
    kMore,   ///< within the head: more bytes to come
    kEnd,    ///< this byte ended the head (the blank line's LF)
    kFault,  ///< this byte is past a bound or makes its line malformed (fault() says which)
  };

  /// Checks the head's next byte. A header line is NAME ':' VALUE CRLF, NAME without whitespace,
  /// VALUE without NUL, and not empty for Content-Length and Transfer-Encoding (cpp-httplib drops a
  /// header with an empty value: "Content-Length: 0" + "Content-Length:" was one length, and the
  /// body a second request); no folded lines, bare LFs or stray CRs. A line over kMaxHeadLine + 1
  /// bytes, or a head over max_head bytes, is a fault at the first byte past it. The request line
  /// (line 0) is cpp-httplib's to parse, but for its ending: a bare LF there is a fault too (the
  /// answer then names it, where cpp-httplib's refusal could not). `c` may be rewritten: an Expect value is handed on in lower
  /// case (cpp-httplib matches "100-continue" case-sensitively; RFC 9110 §10.1.1 makes it
  /// case-insensitive), and as 'x's for an HTTP/1.0 request, whose expectation a server must ignore.
  Step check(char& c);

  /// After kFault: which bound or fault; for kMalformedLine what is wrong ("has no ':'") and which
  /// line (1 = the first header line).
  HeadFault fault() const { return fault_; }
  const char* fault_what() const { return fault_what_; }
  std::size_t fault_line() const { return line_; }

  /// Whether the request line seen so far is one cpp-httplib 0.11 refuses (400 / its own answer)
  /// whatever follows: not three space-separated words (tabs at their edges trimmed), a method
  /// that is not GET, HEAD, POST, PUT, DELETE, CONNECT, OPTIONS, TRACE, PATCH or PRI (known from
  /// its first byte that is not a capital letter), a version other than HTTP/1.0 and HTTP/1.1, a
  /// target of more than two pieces between '?'s, or a NUL. Never true for a
  /// line cpp-httplib accepts. (A CR inside the line, which cpp-httplib took into the URL, is a
  /// kFault: RFC 9112 §2.2.)
  bool request_line_refused() const { return refused_; }

 private:
  Step malformed(const char* what);
  Step end_line();
  void note_request_line_byte(char c);
  void end_piece();
  void end_request_line();

  enum LineState { kLineStart, kBlankCr, kName, kValue, kValueCr };

  std::size_t max_head_;
  std::size_t head_bytes_ = 0, line_bytes_ = 0, line_ = 0;
  LineState line_state_ = kLineStart;
  std::string name_;               // the header line's name so far, lower case (its first 32 bytes)
  bool value_blank_ = true;        // nothing but whitespace in the header line's value so far
  // The request line's pieces as cpp-httplib splits it (note_request_line_byte):
  std::string piece_;                  // the current piece's first 16 bytes, from its first non-tab
  std::size_t piece_len_ = 0;          // its bytes so far
  std::size_t trailing_tabs_ = 0;      // tabs at its end so far (trimmed if the piece ends there)
  std::size_t pieces_ = 0;             // non-empty pieces ended: method, target, version
  std::size_t query_pieces_ = 0;       // the target's non-empty pieces between '?'s
  bool query_piece_open_ = false;      // within one of them
  bool http10_ = false;                // the version is HTTP/1.0
  bool refused_ = false;               // request_line_refused()
  bool tls_ = false;                   // the head began with a TLS record's first byte
  HeadFault fault_ = HeadFault::kNone;
  const char* fault_what_ = "";
};

}  // namespace mamba::server
