// HttpWorkerPool: runs every job, finishes queued jobs on shutdown, and turns the OS refusing a
// thread into an error (cpp-httplib's own pool terminated the process after "listening on").
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include "server/http_worker_pool.h"

namespace mamba::server {
namespace {

TEST(HttpWorkerPool, RunsEveryJobAndDrainsOnShutdown) {
  auto pool = HttpWorkerPool::create(3);
  ASSERT_TRUE(pool.ok()) << pool.error().message;
  std::atomic<int> done{0};
  for (int i = 0; i < 100; ++i)
    (*pool)->enqueue([&done] {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      done.fetch_add(1);
    });
  (*pool)->shutdown();  // returns after the queued jobs ran
  EXPECT_EQ(done.load(), 100);
  (*pool)->shutdown();  // a second call (the destructor's) is harmless
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
TEST(HttpWorkerPool, RefusedThreadIsAnError) { GTEST_SKIP() << "sanitizers reserve more address space than the limit"; }
#else
TEST(HttpWorkerPool, RefusedThreadIsAnError) {
  // In a child process: an address-space limit that leaves room for a few 8 MiB thread stacks.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        rlimit lim{};
        getrlimit(RLIMIT_AS, &lim);
        lim.rlim_cur = 1ull << 30;
        setrlimit(RLIMIT_AS, &lim);
        auto pool = HttpWorkerPool::create(1000);
        if (pool.ok()) std::_Exit(3);
        fprintf(stderr, "%s\n", pool.error().message.c_str());
        std::_Exit(pool.error().code == ErrorCode::kIo ? 0 : 4);
      },
      testing::ExitedWithCode(0), "cannot start 1000 HTTP threads \\(the OS refused thread [0-9]+: ");
}
#endif

}  // namespace
}  // namespace mamba::server
