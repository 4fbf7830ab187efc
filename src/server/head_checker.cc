// HeadChecker (head_checker.h).
#include "server/head_checker.h"

#include <algorithm>
#include <cstring>

namespace mamba::server {

namespace {
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
/// What a line ending in LF alone is told (RFC 9112 §2.2: a server may accept it; cpp-httplib
/// 0.11 does not, and mixing both endings lets a proxy and this server split a head differently).
constexpr const char* kBareLf = "ends in a bare LF: HTTP lines end in CR LF (\\r\\n)";
}  // namespace

void HeadChecker::reset() {
  head_bytes_ = line_bytes_ = line_ = 0;
  line_state_ = kLineStart;
  name_.clear();
  value_blank_ = true;
  http10_ = false;
  piece_.clear();
  piece_len_ = trailing_tabs_ = pieces_ = query_pieces_ = 0;
  query_piece_open_ = false;
  refused_ = false;
  tls_ = false;
  fault_ = HeadFault::kNone;
  fault_what_ = "";
}

HeadChecker::Step HeadChecker::malformed(const char* what) {
  fault_ = HeadFault::kMalformedLine;
  fault_what_ = what;
  return Step::kFault;
}

HeadChecker::Step HeadChecker::end_line() {
  ++line_;
  line_bytes_ = 0;
  line_state_ = kLineStart;
  return Step::kMore;
}

// cpp-httplib 0.11 (Server::parse_request_line) takes the line up to its CRLF (up to a NUL: it
// measures it with strlen), splits it at spaces into pieces trimmed of spaces and tabs (empty ones
// skipped), and wants three: a method from its list, a target with at most two non-empty pieces
// between '?'s, and HTTP/1.0 or HTTP/1.1. Followed here piece by piece, so that a line it refuses
// is known as soon as the byte that decides it arrives.
void HeadChecker::note_request_line_byte(char c) {
  if (c == '\0') {
    refused_ = true;
    return;
  }
  if (c == ' ') {
    end_piece();
    return;
  }
  if (piece_len_ == 0 && c == '\t') return;  // trimmed
  if (pieces_ >= 3) refused_ = true;         // a fourth piece
  if (pieces_ == 0 && ((c != '\t' && (c < 'A' || c > 'Z')) || (c != '\t' && trailing_tabs_ > 0) || piece_len_ >= 7))
    refused_ = true;  // no method of the list has it (a capital letter, a tab inside, too long)
  if (pieces_ == 1) {  // the target: its pieces between '?'s
    if (c == '?') {
      query_piece_open_ = false;
    } else if (c != '\t' && !query_piece_open_) {
      query_piece_open_ = true;
      if (++query_pieces_ > 2) refused_ = true;
    }
  }
  if (piece_.size() < 16) piece_ += c;
  ++piece_len_;
  trailing_tabs_ = c == '\t' ? trailing_tabs_ + 1 : 0;
}

void HeadChecker::end_piece() {
  if (piece_len_ > trailing_tabs_) {
    const std::string word = piece_len_ <= piece_.size() ? piece_.substr(0, piece_len_ - trailing_tabs_) : std::string();
    ++pieces_;
    if (pieces_ == 1) {
      static constexpr const char* kMethods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "PRI"};
      refused_ = refused_ || std::none_of(std::begin(kMethods), std::end(kMethods), [&](const char* m) { return word == m; });
    } else if (pieces_ == 3) {
      http10_ = word == "HTTP/1.0";
      refused_ = refused_ || (!http10_ && word != "HTTP/1.1");
    }
  }
  piece_.clear();
  piece_len_ = trailing_tabs_ = 0;
}

void HeadChecker::end_request_line() {
  end_piece();
  if (pieces_ != 3) refused_ = true;
}

HeadChecker::Step HeadChecker::check(char& c) {
  if (++head_bytes_ > max_head_) {
    fault_ = HeadFault::kTooLong;
    return Step::kFault;
  }
  if (++line_bytes_ > kMaxHeadLine + 1) {
    fault_ = HeadFault::kLineTooLong;
    return Step::kFault;
  }
  const bool header = line_ > 0;
  // A TLS record starts with its content type, 0x16 for a handshake: an https:// client (or a load
  // balancer's TLS health check) on this plain-HTTP port, named as such at its second byte (its
  // first goes to cpp-httplib, which answers only a line it has read something of).
  if (!header && line_bytes_ == 1 && c == '\x16') tls_ = true;
  if (tls_ && line_bytes_ == 2) return malformed("is a TLS handshake (an https:// client?): this port speaks plain HTTP (http://)");
  switch (line_state_) {
    case kLineStart:
      if (c == '\r') {
        line_state_ = kBlankCr;
      } else if (header && (c == ' ' || c == '\t')) {
        return malformed("starts with whitespace (a folded line, which RFC 9112 §5.2 obsoletes)");
      } else if (header && (c == ':' || c == '\n')) {
        return malformed(c == ':' ? "has an empty name" : "(the blank line that ends the headers) is a bare LF: HTTP lines end in CR LF (\\r\\n)");
      } else {
        line_state_ = header ? kName : kValue;  // the request line has no name: cpp-httplib reads it
        name_.clear();
        if (header) name_ += lower(c);
        if (c == '\n') {  // an empty request line (a header line's LF returned above): cpp-httplib refuses it
          refused_ = true;
          return end_line();
        }
        if (!header) note_request_line_byte(c);
      }
      break;
    case kBlankCr:
      if (c == '\n') {  // "\r\n" alone: the blank line (or an empty request line, which cpp-httplib refuses)
        if (!header) refused_ = true;
        return Step::kEnd;
      }
      return malformed("has a CR that does not end it");
    case kName:
      if (c == ':') {
        line_state_ = kValue;
        value_blank_ = true;
      } else if (c == ' ' || c == '\t') {
        return malformed("has whitespace in its name or before its ':' (RFC 9112 §5.1)");
      } else if (c == '\r' || c == '\n') {
        return malformed("has no ':'");
      } else if (name_.size() < 32) {
        name_ += lower(c);
      }
      break;
    case kValue:
      if (c == '\r') {
        line_state_ = kValueCr;
      } else if (c == '\n') {
        return malformed(kBareLf);
      } else if (header) {
        if (c == '\0') return malformed("holds a NUL byte (RFC 9110 §5.5)");
        if (c != ' ' && c != '\t') value_blank_ = false;
        if (name_ == "expect") c = http10_ ? 'x' : lower(c);
      } else {
        note_request_line_byte(c);
      }
      break;
    case kValueCr:
      if (c == '\n') {
        if (header && value_blank_ && (name_ == "content-length" || name_ == "transfer-encoding"))
          return malformed(name_ == "content-length" ? "is a Content-Length without a value"
                                                     : "is a Transfer-Encoding without a value");
        if (!header) end_request_line();
        return end_line();
      }
      return malformed("has a CR that does not end it");  // (RFC 9112 §2.2: cpp-httplib took it into the URL)
  }
  return Step::kMore;
}

}  // namespace mamba::server
