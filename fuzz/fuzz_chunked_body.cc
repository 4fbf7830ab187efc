// libFuzzer target: ChunkedBodyDecoder, the decoder of chunked request bodies the server runs on
// every client's bytes (src/server/chunked_body.h). Besides memory safety (ASan/UBSan under
// libFuzzer), its contract: the same bytes give the same state, body, error and consumed count
// whether fed whole or a piece of at most next_read_size() bytes at a time (so reading that way
// never takes a byte past the body); a body is never over its limit; a failure names itself; a
// decoder that ended takes no more bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "server/chunked_body.h"

using mamba::server::ChunkedBodyDecoder;

namespace {

struct Run {
  ChunkedBodyDecoder::State state;
  std::string body, error;
  std::size_t consumed = 0;
};

/// Feeds `in` in pieces of at most `piece` bytes (0: whole), each also at most next_read_size()
/// when `bounded`.
Run run(std::string_view in, std::size_t max_body, std::size_t piece, bool bounded) {
  ChunkedBodyDecoder d(max_body);
  Run r;
  while (d.state() == ChunkedBodyDecoder::State::kMore && r.consumed < in.size()) {
    std::size_t n = in.size() - r.consumed;
    if (piece != 0) n = std::min(n, piece);
    if (bounded) {
      if (d.next_read_size() == 0) std::abort();
      n = std::min(n, d.next_read_size());
    }
    const std::size_t used = d.feed(in.substr(r.consumed, n), r.body);
    if (used > n || (used < n && d.state() == ChunkedBodyDecoder::State::kMore)) std::abort();
    r.consumed += used;
    if (used < n) break;
  }
  std::string more;
  if (d.state() != ChunkedBodyDecoder::State::kMore && (d.feed("0\r\n\r\n", more) != 0 || d.next_read_size() != 0)) std::abort();
  if (d.body_bytes() != r.body.size() || r.body.size() > max_body) std::abort();
  const bool failed = d.state() == ChunkedBodyDecoder::State::kTooLarge || d.state() == ChunkedBodyDecoder::State::kMalformed;
  if (failed == d.error().empty()) std::abort();
  r.state = d.state();
  r.error = d.error();
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  // The first byte picks the body limit (0 … 255 · 64 bytes), the second the piece size.
  const std::size_t max_body = static_cast<std::size_t>(data[0]) * 64;
  const std::size_t piece = data[1] % 16 + 1;
  const std::string_view in(reinterpret_cast<const char*>(data + 2), size - 2);
  const Run whole = run(in, max_body, 0, false);
  const Run bounded = run(in, max_body, 0, true);
  const Run pieces = run(in, max_body, piece, true);
  for (const Run* r : {&bounded, &pieces})
    if (r->state != whole.state || r->body != whole.body || r->error != whole.error || r->consumed != whole.consumed) std::abort();
  return 0;
}
