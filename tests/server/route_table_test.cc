// RouteTable: literal paths (cpp-httplib matches patterns as regular expressions, so a path with
// '.', '+' or parentheses — a model id in /v1/models/{id} — must match itself only), and 405 with
// the Allow header's methods.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <string>
#include <thread>

#include "server/route_table.h"

namespace mamba::server {
namespace {

TEST(RouteTable, PathsWithRegexCharactersMatchThemselvesOnly) {
  httplib::Server svr;
  RouteTable routes;
  const std::string id = "org/mamba-2.8b+(v1)";
  routes.add(svr, "GET", "/v1/models/" + id, [](const httplib::Request&, httplib::Response& res) { res.set_content("ok", "text/plain"); });
  routes.add(svr, "POST", "/a.b", [](const httplib::Request&, httplib::Response& res) { res.set_content("post", "text/plain"); });
  const int port = svr.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread t([&] { svr.listen_after_bind(); });
  while (!svr.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  httplib::Client cli("127.0.0.1", port);
  auto hit = cli.Get(("/v1/models/" + id).c_str());
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->status, 200);
  EXPECT_EQ(hit->body, "ok");
  // As regexes '.' would match 'x' and "+(v1)" would match "v1"; as literals neither does.
  for (const char* other : {"/v1/models/org/mamba-2x8b+(v1)", "/v1/models/org/mamba-2.8bv1", "/v1/models/org/mamba-2.8b"}) {
    auto miss = cli.Get(other);
    ASSERT_TRUE(miss) << other;
    EXPECT_EQ(miss->status, 404) << other;
  }
  auto post = cli.Post("/a.b", "", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->body, "post");
  auto post_other = cli.Post("/axb", "", "text/plain");
  ASSERT_TRUE(post_other);
  EXPECT_EQ(post_other->status, 404);
  svr.stop();
  t.join();
  EXPECT_EQ(routes.disallowed("POST", "/v1/models/" + id), "GET, HEAD");
  EXPECT_EQ(routes.disallowed("GET", "/a.b"), "POST");
  EXPECT_EQ(routes.disallowed("GET", "/v1/models/" + id), "");
  EXPECT_EQ(routes.disallowed("GET", "/unknown"), "");
}

}  // namespace
}  // namespace mamba::server
