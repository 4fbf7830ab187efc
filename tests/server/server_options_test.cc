// validate_server_options: every out-of-range option is a kInvalidArgument naming the flag
// (mamba-server prints it as its one `error:` line and exits 2), checked before any model loads.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "mamba/server.h"

namespace mamba {
namespace {

TEST(ServerOptions, DefaultsAreValid) { EXPECT_TRUE(validate_server_options(ServerOptions{}).ok()); }

TEST(ServerOptions, OutOfRangeNamesTheFlag) {
  struct Case {
    std::function<void(ServerOptions&)> set;
    std::string mentions;
  };
  const Case cases[] = {
      {[](ServerOptions& o) { o.port = 99999; }, "--port"},
      {[](ServerOptions& o) { o.max_concurrent_requests = 0; }, "--max-concurrent-requests"},
      {[](ServerOptions& o) { o.max_best_of = 0; }, "--max-best-of must be >= 1, got 0"},
      {[](ServerOptions& o) { o.prefix_cache_bytes = -1; }, "--prefix-cache-memory must be >= 0, got -1"},
      {[](ServerOptions& o) { o.http_threads = 1000000; }, "--http-threads must be 0 (max-concurrent-requests + 32) to 4096, got 1000000"},
      {[](ServerOptions& o) { o.http_threads = -1; }, "--http-threads"},
      {[](ServerOptions& o) { o.max_concurrent_requests = 100000; }, "needs 100032 HTTP threads"},
      {[](ServerOptions& o) { o.drain_grace_seconds = std::nan(""); }, "--shutdown-grace"},
      {[](ServerOptions& o) { o.drain_grace_seconds = std::numeric_limits<double>::infinity(); }, "--shutdown-grace"},
      {[](ServerOptions& o) { o.drain_grace_seconds = -1; }, "--shutdown-grace"},
      {[](ServerOptions& o) { o.max_input_tokens = 10; o.max_total_tokens = 10; }, "--max-input-tokens"},
      {[](ServerOptions& o) { o.cors_allow_origins = {"http://a.example", "localhost:3000"}; }, "--cors-allow-origin: 'localhost:3000' is not an origin"},
  };
  for (const auto& c : cases) {
    ServerOptions o;
    c.set(o);
    Status st = validate_server_options(o);
    ASSERT_FALSE(st.ok()) << c.mentions;
    EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(st.message().find(c.mentions), std::string::npos) << st.message();
  }
  ServerOptions big;  // many concurrent requests are fine with an explicit --http-threads
  big.max_concurrent_requests = 100000;
  big.http_threads = 256;
  EXPECT_TRUE(validate_server_options(big).ok());
}

}  // namespace
}  // namespace mamba
