#include "server/body_wait.h"

#include "server/header_values.h"

namespace mamba::server {

BodyWait::BodyWait(std::string_view head, std::size_t max_body_bytes) : decoder_(max_body_bytes) {
  const std::size_t line_end = head.find("\r\n");
  if (line_end == std::string_view::npos) return;
  const std::string_view request_line = trim_ows(head.substr(0, line_end));
  const std::string_view method = request_line.substr(0, request_line.find(' '));
  const std::string_view version = trim_ows(request_line.substr(request_line.rfind(' ') + 1));
  if (method == "GET" || method == "HEAD") return;

  std::size_t lengths = 0, codings = 0;
  bool lengths_agree = true, chunked = false;
  std::uint64_t length = 0;
  for (std::size_t at = line_end + 2; at < head.size();) {
    std::size_t end = head.find("\r\n", at);
    if (end == std::string_view::npos) end = head.size();
    const std::string_view line = head.substr(at, end - at);
    at = end + 2;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;  // the blank line
    const std::string_view name = line.substr(0, colon), value = trim_ows(line.substr(colon + 1));
    if (equals_ascii_ci(name, "expect")) return;  // the body follows "100 Continue", from a worker
    if (equals_ascii_ci(name, "content-length")) {
      std::uint64_t v = 0;
      if (!is_decimal(value, &v)) return;  // refused unread (400)
      lengths_agree = lengths_agree && (lengths == 0 || v == length);
      length = v;
      ++lengths;
    } else if (equals_ascii_ci(name, "transfer-encoding")) {
      chunked = equals_ascii_ci(value, "chunked");
      ++codings;
    }
  }
  if (lengths > 0 && codings == 0) {
    if (!lengths_agree || length == 0 || length > max_body_bytes) return;  // no body, or one refused unread
    length_ = length;
  } else if (codings == 1 && lengths == 0) {
    if (!chunked || method != "POST" || version != "HTTP/1.1") return;  // refused unread (501 / 400)
    chunked_ = true;
    max_raw_ = std::uint64_t{max_body_bytes} + kChunkedSlack;
  } else {
    return;  // no body, or a framing refused unread
  }
  wanted_ = true;
  decided_ = false;
}

bool BodyWait::feed(std::string_view more) {
  if (decided_ || more.empty()) return decided_;
  fed_ += more.size();
  if (!chunked_) {
    decided_ = fed_ >= length_;
    return decided_;
  }
  // Only where the body ends matters: the decoded data are dropped as they come, a slice at a time
  // (the scratch string keeps its capacity: fed a whole 8 MiB chunk at once it would hold 8 MiB).
  while (!more.empty() && decoder_.state() == ChunkedBodyDecoder::State::kMore) {
    const std::size_t used = decoder_.feed(more.substr(0, kSlice), scratch_);
    scratch_.clear();
    more.remove_prefix(used);
    if (used == 0) break;
  }
  decided_ = decoder_.state() != ChunkedBodyDecoder::State::kMore || fed_ >= max_raw_;
  return decided_;
}

std::uint64_t BodyWait::max_more() const {
  if (decided_) return 0;
  return (chunked_ ? max_raw_ : length_) - fed_;
}

bool ReadAheadBytes::take(std::size_t bytes) {
  std::size_t held = held_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ || held > limit_ - bytes) return false;
  } while (!held_.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
  return true;
}

}  // namespace mamba::server
