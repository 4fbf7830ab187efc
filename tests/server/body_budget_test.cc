// BodyBudget: bodies below kSmall never wait; larger ones share the budget (one over it takes it
// whole), and a waiting one goes on when enough is released.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "server/context.h"

namespace mamba::server {
namespace {

TEST(BodyBudget, SmallBodiesNeverWait) {
  BodyBudget budget(BodyBudget::kSmall * 2);
  auto big = budget.acquire(BodyBudget::kSmall * 2);
  EXPECT_EQ(budget.in_use(), BodyBudget::kSmall * 2);
  auto small = budget.acquire(BodyBudget::kSmall - 1);  // would deadlock if it waited
  EXPECT_EQ(budget.in_use(), BodyBudget::kSmall * 2);
  big.release();
  EXPECT_EQ(budget.in_use(), 0u);
}

TEST(BodyBudget, LargeBodiesWaitUntilTheyFit) {
  const std::size_t mib = std::size_t{1} << 20;
  BodyBudget budget(16 * mib);
  auto a = budget.acquire(8 * mib);
  auto b = budget.acquire(8 * mib);
  std::atomic<bool> got{false};
  std::thread t([&] {
    auto c = budget.acquire(100 * mib);  // over the whole budget: waits until none is in use
    got = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(got.load());
  a.release();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(got.load()) << "8 MiB still in use";
  {
    BodyBudget::Lease moved = std::move(b);  // a moved lease releases once
  }
  t.join();
  EXPECT_TRUE(got.load());
  EXPECT_EQ(budget.in_use(), 0u);
}

}  // namespace
}  // namespace mamba::server
