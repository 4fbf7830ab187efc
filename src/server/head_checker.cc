// HeadChecker (head_checker.h).
#include "server/head_checker.h"

#include <algorithm>
#include <cstring>

namespace mamba::server {

namespace {
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
}  // namespace

void HeadChecker::reset() {
  head_bytes_ = line_bytes_ = line_ = 0;
  line_state_ = kLineStart;
  name_.clear();
  value_blank_ = true;
  version_.fill('\0');
  http10_ = false;
  method_.clear();
  method_done_ = false;
  refused_ = false;
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

// cpp-httplib 0.11 (Server::parse_request_line) takes the line up to its CRLF, splits it at
// spaces (skipping empty pieces, trimming spaces and tabs), and wants three pieces: a method from
// its list, a target, and HTTP/1.0 or HTTP/1.1.
void HeadChecker::note_request_line_byte(char c) {
  const bool blank = c == ' ' || c == '\t';
  if (!method_done_) {
    if (blank) {
      if (!method_.empty()) {
        method_done_ = true;
        static constexpr const char* kMethods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH", "PRI"};
        refused_ = refused_ || std::none_of(std::begin(kMethods), std::end(kMethods), [&](const char* m) { return method_ == m; });
      }
    } else if (c < 'A' || c > 'Z' || method_.size() >= 7) {
      refused_ = true;
    } else {
      method_ += c;
    }
  }
  if (blank) return;
  std::memmove(version_.data(), version_.data() + 1, version_.size() - 1);
  version_.back() = c;
  http10_ = std::memcmp(version_.data(), "HTTP/1.0", 8) == 0;
}

void HeadChecker::end_request_line(bool crlf) {
  if (!crlf || !method_done_ || (!http10_ && std::memcmp(version_.data(), "HTTP/1.1", 8) != 0)) refused_ = true;
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
  switch (line_state_) {
    case kLineStart:
      if (c == '\r') {
        line_state_ = kBlankCr;
      } else if (header && (c == ' ' || c == '\t')) {
        return malformed("starts with whitespace (a folded line, which RFC 9112 §5.2 obsoletes)");
      } else if (header && (c == ':' || c == '\n')) {
        return malformed(c == ':' ? "has an empty name" : "ends in a bare LF");
      } else {
        line_state_ = header ? kName : kValue;  // the request line has no name: cpp-httplib reads it
        name_.clear();
        if (header) name_ += lower(c);
        if (c == '\n') {  // (the request line's: a header line returned above)
          end_request_line(false);
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
      if (header) return malformed("has a CR that does not end it");
      line_state_ = kValue;
      note_request_line_byte(c);  // (the request line's: a header line returned above)
      break;
    case kName:
      if (c == ':') {
        line_state_ = kValue;
        value_blank_ = true;
      } else if (c == ' ' || c == '\t') {
        return malformed("has whitespace before its ':' (RFC 9112 §5.1)");
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
        if (header) return malformed("ends in a bare LF");
        end_request_line(false);
        return end_line();
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
        if (!header) end_request_line(true);
        return end_line();
      }
      if (header) return malformed("has a CR that does not end it");
      line_state_ = c == '\r' ? kValueCr : kValue;
      if (c != '\r') note_request_line_byte(c);  // (the request line's: a header line returned above)
      break;
  }
  return Step::kMore;
}

}  // namespace mamba::server
