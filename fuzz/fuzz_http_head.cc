// libFuzzer target: HeadChecker, the byte-by-byte check of an HTTP request head that the server
// runs on every client's bytes (src/server/head_checker.h). Besides memory safety (ASan/UBSan under
// libFuzzer), the checker's contract: it stops at the first kEnd or kFault; a fault names a bound
// or a malformed header line; a head is never longer than its bound; request_line_refused() stays
// set once set; a rewritten byte is the Expect value's lower case or 'x'; and the same bytes give
// the same steps again after reset() (the parked scan and the worker's reader must agree).
// A head that ends is then read by BodyWait (src/server/body_wait.h), the rest of the input as its
// body: fed whole or a byte at a time it decides the same, at the same byte, once decided stays so,
// and never wants more bytes than it said (max_more).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "server/body_wait.h"
#include "server/head_checker.h"

using mamba::server::BodyWait;
using mamba::server::HeadChecker;
using mamba::server::HeadFault;

namespace {

/// The steps of `checker` over `bytes` (until kEnd / kFault), each byte as it would be handed out.
std::vector<int> run(HeadChecker& checker, const std::string& bytes, std::string& out, std::size_t max_head) {
  std::vector<int> steps;
  bool refused = false;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    char c = bytes[i];
    const HeadChecker::Step step = checker.check(c);
    steps.push_back(static_cast<int>(step));
    if (c != bytes[i] && c != 'x' && !(bytes[i] >= 'A' && bytes[i] <= 'Z' && c == bytes[i] - 'A' + 'a')) std::abort();
    if (refused && !checker.request_line_refused()) std::abort();
    refused = checker.request_line_refused();
    if (step == HeadChecker::Step::kFault) {
      if (checker.fault() == HeadFault::kNone || checker.fault() == HeadFault::kIncomplete) std::abort();
      if (checker.fault() == HeadFault::kTooLong && i + 1 <= max_head) std::abort();
      break;
    }
    out += c;
    if (step == HeadChecker::Step::kEnd) break;
  }
  if (out.size() > max_head) std::abort();
  return steps;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  // The first byte picks a head bound between 64 bytes and 16 KiB (small ones reach the bound).
  const std::size_t max_head = 64 + static_cast<std::size_t>(data[0]) * 64;
  const std::string bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  HeadChecker checker(max_head);
  std::string out1, out2;
  const std::vector<int> first = run(checker, bytes, out1, max_head);
  checker.reset();
  const std::vector<int> again = run(checker, bytes, out2, max_head);
  if (first != again || out1 != out2) std::abort();
  if (first.empty() || first.back() != static_cast<int>(HeadChecker::Step::kEnd)) return 0;
  // The body: a limit from the first byte too (0 to 4 KiB, so that lengths and chunks reach it).
  const std::size_t max_body = static_cast<std::size_t>(data[0]) * 16;
  const std::string rest = bytes.substr(out1.size());
  BodyWait whole(out1, max_body), bytewise(out1, max_body);
  if (!whole.wanted() && (!whole.decided() || whole.max_more() != 0)) std::abort();
  whole.feed(rest);
  std::size_t decided_at = rest.size();
  for (std::size_t i = 0; i < rest.size(); ++i) {
    const bool was = bytewise.decided();
    const std::uint64_t more = bytewise.max_more();
    bytewise.feed(std::string_view(rest).substr(i, 1));
    if (was && !bytewise.decided()) std::abort();
    if (!was && (more == 0 || bytewise.max_more() > more - 1)) std::abort();  // each byte it looked at was one it wanted
    if (!was && bytewise.decided()) decided_at = i;
  }
  if (whole.decided() != bytewise.decided()) std::abort();
  if (bytewise.wanted() && decided_at < rest.size() && decided_at + 1 > max_body + BodyWait::kChunkedSlack) std::abort();
  return 0;
}
