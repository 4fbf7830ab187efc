// The CPU backend's compute thread pool (src/ops/cpu/thread_pool.h): every thread index runs once
// per region, all writes are visible when the region returns, nested regions run on the caller,
// concurrent callers are serialised, parallel_for (and parallel_for_balanced, whose fast threads
// take a slow one's tail) covers each item exactly once, and parallel_tasks runs each task once, ops
// inside it included.
#include "ops/cpu/thread_pool.h"

#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <functional>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "mamba/thread_limit.h"
#include "ops/ops.h"

namespace mamba {
namespace {

TEST(ThreadPool, EveryThreadIndexRunsOncePerRegionAndItsWritesAreVisible) {
  // 8 and 33 threads exceed the CI machine's 2 CPUs: the no-spin path must still finish.
  for (int nt : {2, 3, 8, 33, 2}) {
    for (int rep = 0; rep < 200; ++rep) {
      std::vector<int> hits(static_cast<std::size_t>(nt), 0);  // plain ints: the return publishes them
      std::vector<int> seen_nt(static_cast<std::size_t>(nt), 0);
      ops::cpu::parallel_region(nt, [&](int t, int k) {
        ++hits[static_cast<std::size_t>(t)];
        seen_nt[static_cast<std::size_t>(t)] = k;
      });
      for (int t = 0; t < nt; ++t) {
        ASSERT_EQ(hits[static_cast<std::size_t>(t)], 1) << "nt " << nt << ", thread " << t << ", rep " << rep;
        ASSERT_EQ(seen_nt[static_cast<std::size_t>(t)], nt);
      }
    }
  }
}

/// Pins the calling thread to one allowed CPU and the pool's workers (threads named mamba-cpu-N) to
/// another, for its lifetime; restores every affinity after.
class PinnedApart {
 public:
  PinnedApart() {
    cpu_set_t all;
    if (sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2) return;
    original_ = all;
    int cpus[2], n = 0;
    for (int c = 0; c < CPU_SETSIZE && n < 2; ++c)
      if (CPU_ISSET(c, &all)) cpus[n++] = c;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[0], &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return;
    CPU_ZERO(&one);
    CPU_SET(cpus[1], &one);
    for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      std::getline(comm, name);
      if (name.rfind("mamba-cpu-", 0) != 0) continue;
      const pid_t tid = static_cast<pid_t>(std::stol(task.path().filename().string()));
      if (sched_setaffinity(tid, sizeof one, &one) == 0) workers_.push_back(tid);
    }
    ok_ = !workers_.empty();
  }
  ~PinnedApart() {
    if (!original_) return;
    sched_setaffinity(0, sizeof *original_, &*original_);
    for (pid_t tid : workers_) sched_setaffinity(tid, sizeof *original_, &*original_);
  }
  PinnedApart(const PinnedApart&) = delete;
  PinnedApart& operator=(const PinnedApart&) = delete;
  bool ok() const { return ok_; }

 private:
  std::optional<cpu_set_t> original_;
  std::vector<pid_t> workers_;
  bool ok_ = false;
};

TEST(ThreadPool, TheCallerRunsTheShareOfALateWorker) {
  // After 2 ms without regions the worker sleeps in a futex; its wake-up takes microseconds while
  // the caller's own share is trivial, so the caller claims share 1 too instead of waiting for it
  // (a worker whose core another process holds is late the same way). Each share still runs once.
  // A worker can also wake within the caller's futex-wake system call and start share 1 before the
  // caller has finished share 0, and on a 2-CPU VM it did so for whole phases of consecutive regions
  // (OMP_WAIT_POLICY=passive after OpenMP regions: 20 regions missed the caller's claim in ~1 run of
  // 3; over 200 regions the caller ran share 1 in 145–200): 200 regions.
  if (usable_cpus() < 2) GTEST_SKIP() << "one usable CPU: regions of 2 are OpenMP regions (the pool's rule)";
  // With both threads on one CPU the woken worker preempted the caller and started share 1 first,
  // region after region (seen once in ~10 runs of the suite): this thread on one CPU, the workers
  // on another, so that the worker's wake-up is the only race.
  ops::cpu::parallel_region(2, [](int, int) {});  // the worker exists
  const PinnedApart pinned;
  if (!pinned.ok()) GTEST_SKIP() << "cannot pin threads to two CPUs here";
  int caller_ran_share_1 = 0;
  for (int rep = 0; rep < 200; ++rep) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::thread::id ran[2];
    int hits[2] = {0, 0};
    ops::cpu::parallel_region(2, [&](int t, int) {
      ran[t] = std::this_thread::get_id();
      ++hits[t];
    });
    ASSERT_EQ(hits[0], 1);
    ASSERT_EQ(hits[1], 1);
    caller_ran_share_1 += ran[1] == std::this_thread::get_id();
  }
  EXPECT_GT(caller_ran_share_1, 0) << "the caller waited for a sleeping worker every time";
}

TEST(ThreadPool, RegionsStartingAsTheWorkerFallsAsleepLoseNoShare) {
  // The worker goes to sleep after its spin (kSpinMicroseconds; ~256 pauses under
  // OMP_WAIT_POLICY=passive, ctest's setting) while the caller may be publishing the next region:
  // gaps between regions around both limits hit that window. Whichever side wins, each share runs
  // exactly once (the caller takes a share the worker has not started) and the caller returns
  // only after both finished (a share that lags sets its flag late: the assertion would see 0).
  if (usable_cpus() < 2) GTEST_SKIP() << "one usable CPU: regions of 2 are OpenMP regions (the pool's rule)";
  using Clock = std::chrono::steady_clock;
  const int gaps_us[] = {0, 1, 3, 6, 10, 20, 40, 490, 500, 510};
  int worker_ran = 0;
  for (int rep = 0; rep < 600; ++rep) {
    const auto until = Clock::now() + std::chrono::microseconds(gaps_us[rep % 10]);
    while (Clock::now() < until) {
    }
    std::atomic<int> hits[2] = {0, 0};
    std::thread::id ran[2];
    ops::cpu::parallel_region(2, [&](int t, int) {
      if (rep % 7 == 0) std::this_thread::sleep_for(std::chrono::microseconds(50));  // a slow share
      ran[t] = std::this_thread::get_id();
      hits[t].fetch_add(1, std::memory_order_relaxed);
    });
    ASSERT_EQ(hits[0].load(), 1) << "rep " << rep;
    ASSERT_EQ(hits[1].load(), 1) << "rep " << rep;
    ASSERT_EQ(ran[0], std::this_thread::get_id()) << "share 0 is the caller's";
    worker_ran += ran[1] != std::this_thread::get_id();
  }
  EXPECT_GT(worker_ran, 0) << "the worker never ran a share";
}

TEST(ThreadPool, AWorkerRunsTheShareOfAnotherLateWorker) {
  // Regions of 4 after 2 ms without regions: the three workers sleep, and the caller wakes them one
  // after the other. Share 1 is empty, the caller's share 0 busy for 200 µs, so worker 1 is done
  // while workers 2 and 3 may still be waking, and takes their shares (thread_pool.cc work()); a
  // late worker then finds its share claimed and must not touch the region. Each share runs once,
  // all writes are visible at the return, and over 200 regions some worker ran two shares.
  // Needs a pool of 4 CPUs: machines of 4+ CPUs, or MAMBA_TEST_POOL_CPUS=4 on CI's two (ctest's
  // ops.pool_of_4_cpus entry runs this suite so).
  constexpr int kThreads = 4;
  if (ops::cpu::pool_cpus() < kThreads)
    GTEST_SKIP() << "the pool has " << ops::cpu::pool_cpus() << " CPUs, fewer than " << kThreads
                 << ": regions of 4 are OpenMP regions here (ctest's ops.pool_of_4_cpus sets MAMBA_TEST_POOL_CPUS=4)";
  using Clock = std::chrono::steady_clock;
  int regions_with_a_worker_running_two = 0;
  for (int rep = 0; rep < 200; ++rep) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::thread::id ran[kThreads];
    int hits[kThreads] = {0, 0, 0, 0};  // plain ints: the region's return publishes them
    ops::cpu::parallel_region(kThreads, [&](int t, int nt) {
      ASSERT_EQ(nt, kThreads);
      if (t == 0) {
        const auto until = Clock::now() + std::chrono::microseconds(200);
        while (Clock::now() < until) {
        }
      }
      ran[t] = std::this_thread::get_id();
      ++hits[t];
    });
    for (int t = 0; t < kThreads; ++t) ASSERT_EQ(hits[t], 1) << "share " << t << ", region " << rep;
    ASSERT_EQ(ran[0], std::this_thread::get_id()) << "share 0 is the caller's";
    bool two = false;
    for (int a = 1; a < kThreads; ++a)
      for (int b = a + 1; b < kThreads; ++b) two |= ran[a] == ran[b] && ran[a] != std::this_thread::get_id();
    regions_with_a_worker_running_two += two;
  }
  EXPECT_GT(regions_with_a_worker_running_two, 0) << "no worker ever ran a late worker's share";
}

TEST(ThreadPool, NestedRegionRunsOnTheCallingThread) {
  std::atomic<int> inner_calls{0}, inner_nt_sum{0};
  ops::cpu::parallel_region(2, [&](int, int) {
    const auto outer = std::this_thread::get_id();
    ops::cpu::parallel_region(4, [&](int t, int k) {
      EXPECT_EQ(t, 0);
      EXPECT_EQ(std::this_thread::get_id(), outer);
      ++inner_calls;
      inner_nt_sum += k;
    });
  });
  EXPECT_EQ(inner_calls.load(), 2);  // once per outer thread, as body(0, 1)
  EXPECT_EQ(inner_nt_sum.load(), 2);
}

TEST(ThreadPool, ConcurrentCallersAreSerialised) {
  std::atomic<long> total{0};
  auto caller = [&] {
    for (int i = 0; i < 500; ++i)
      ops::cpu::parallel_region(2, [&](int t, int) { total += t + 1; });  // 1 + 2 per region
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2L * 500 * 3);
}

TEST(ThreadPool, ParallelForCoversEachItemOnceInContiguousRanges) {
  const int saved = ops::num_threads();
  for (int threads : {1, 2, 5}) {
    ops::set_num_threads(threads);
    for (std::int64_t n : {0, 1, 2, 7, 1000}) {
      for (bool parallel : {false, true}) {
        std::vector<int> count(static_cast<std::size_t>(n), 0);
        std::atomic<int> calls{0};
        ops::cpu::parallel_for(n, parallel, [&](std::int64_t b, std::int64_t e) {
          ++calls;
          EXPECT_LT(b, e);
          for (std::int64_t i = b; i < e; ++i) ++count[static_cast<std::size_t>(i)];
        });
        for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(count[static_cast<std::size_t>(i)], 1) << "item " << i;
        const std::int64_t want = n == 0 ? 0 : parallel ? std::min<std::int64_t>(threads, n) : 1;
        EXPECT_EQ(calls.load(), want) << "n " << n << ", threads " << threads << ", parallel " << parallel;
      }
    }
  }
  ops::set_num_threads(saved);
}

TEST(ThreadPool, ParallelForBalancedCoversEachItemOnceInGrainAlignedCalls) {
  const int saved = ops::num_threads();
  for (int threads : {1, 2, 3, 5}) {
    ops::set_num_threads(threads);
    for (std::int64_t n : {0, 1, 7, 100, 1001}) {
      for (std::int64_t grain : {1, 4, 24}) {
        for (bool parallel : {false, true}) {
          std::vector<std::atomic<int>> count(static_cast<std::size_t>(n));
          ops::cpu::parallel_for_balanced(n, grain, parallel, [&](std::int64_t b, std::int64_t e) {
            EXPECT_LT(b, e);
            EXPECT_EQ(b % grain, 0) << "a call starts inside a grain";
            EXPECT_TRUE(e % grain == 0 || e == n) << "a call ends inside a grain";
            for (std::int64_t i = b; i < e; ++i) ++count[static_cast<std::size_t>(i)];
          });
          for (std::int64_t i = 0; i < n; ++i)
            ASSERT_EQ(count[static_cast<std::size_t>(i)].load(), 1)
                << "item " << i << ", n " << n << ", grain " << grain << ", threads " << threads;
        }
      }
    }
  }
  ops::set_num_threads(saved);
}

TEST(ThreadPool, ParallelForBalancedNestedInARegionIsOneCall) {
  // Inside a region parallel_region runs its body on the calling thread alone: the balanced loop
  // then makes one call over everything (not one per grain of the other threads' ranges).
  const int saved = ops::num_threads();
  ops::set_num_threads(2);
  std::atomic<int> calls{0}, items{0};
  ops::cpu::parallel_region(2, [&](int, int) {
    ops::cpu::parallel_for_balanced(100, 1, true, [&](std::int64_t b, std::int64_t e) {
      ++calls;
      items += static_cast<int>(e - b);
    });
  });
  ops::set_num_threads(saved);
  EXPECT_EQ(items.load(), 200);  // each of the two outer shares covered all 100
  EXPECT_EQ(calls.load(), 2);
}

TEST(ThreadPool, ParallelForBalancedGivesASlowThreadsTailToTheOthers) {
  // Two threads, 64 items: every item the worker runs takes 1 ms, the caller's none. A static
  // split runs 32 on each; balanced, the caller ends its range at once and then takes the worker's
  // items from the back (or the worker's whole share, when it is late to wake): more than 32.
  if (usable_cpus() < 2) GTEST_SKIP() << "one usable CPU: regions of 2 are OpenMP regions (the pool's rule)";
  const int saved = ops::num_threads();
  ops::set_num_threads(2);
  const auto caller = std::this_thread::get_id();
  std::atomic<int> on_caller{0}, total{0};
  ops::cpu::parallel_for_balanced(64, 1, true, [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t i = b; i < e; ++i) {
      ++total;
      if (std::this_thread::get_id() == caller) ++on_caller;
      else std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  ops::set_num_threads(saved);
  EXPECT_EQ(total.load(), 64);
  EXPECT_GT(on_caller.load(), 32) << "the caller did not take the slow worker's tail";
}

TEST(ThreadPool, ParallelTasksRunEachTaskOnceWithOpsInside) {
  const int saved = ops::num_threads();
  std::vector<float> row(4096);
  for (std::size_t i = 0; i < row.size(); ++i) row[i] = static_cast<float>((i * 37) % 1001) - 500.0f;
  const std::int64_t want_argmax = ops::argmax(row.data(), static_cast<std::int64_t>(row.size()));
  for (int threads : {1, 2, 5}) {
    ops::set_num_threads(threads);
    for (std::int64_t n : {0, 1, 2, 3, 64}) {
      std::vector<int> count(static_cast<std::size_t>(n), 0);
      std::vector<std::int64_t> got(static_cast<std::size_t>(n), -1);
      ops::parallel_tasks(n, [&](std::int64_t i) {
        ++count[static_cast<std::size_t>(i)];
        // Uneven tasks, each calling an op (it runs on the task's thread).
        for (std::int64_t r = 0; r <= i % 4; ++r) got[static_cast<std::size_t>(i)] = ops::argmax(row.data(), 4096);
      });
      for (std::int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(count[static_cast<std::size_t>(i)], 1) << "task " << i << ", n " << n << ", threads " << threads;
        EXPECT_EQ(got[static_cast<std::size_t>(i)], want_argmax);
      }
    }
  }
  ops::set_num_threads(saved);
}

/// Runs child() in a fork of this process and returns its exit status (child() returns the code;
/// anything thrown is 100; the child never returns into the test; a child still running after 60 s,
/// e.g. blocked on a lock the parent held at the fork, dies of SIGALRM: 128 + 14). -1 when fork or
/// waitpid fails.
int in_child(const std::function<int()>& child) {
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::alarm(60);
    int code = 100;
    try {
      code = child();
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  pid_t r;
  while ((r = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  if (r != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/// In a child: `regions` regions of 2 with every share counted; 0 when each ran exactly once, else
/// 10 + the region. Sets *worker_ran when some share ran on another thread than this one. Share 0
/// lasts 20 µs: with an empty one the caller claims share 1 before a spinning worker sees the region
/// (0 of 2000 regions on the worker).
int two_share_regions(int regions, bool* worker_ran) {
  using Clock = std::chrono::steady_clock;
  for (int rep = 0; rep < regions; ++rep) {
    std::atomic<int> hits[2] = {0, 0};
    std::thread::id ran[2];
    ops::cpu::parallel_region(2, [&](int t, int) {
      if (t == 0)
        for (const auto until = Clock::now() + std::chrono::microseconds(20); Clock::now() < until;) {
        }
      ran[t] = std::this_thread::get_id();
      hits[t].fetch_add(1, std::memory_order_relaxed);
    });
    if (hits[0].load() != 1 || hits[1].load() != 1) return 10 + rep % 100;
    if (worker_ran != nullptr && ran[1] != std::this_thread::get_id()) *worker_ran = true;
  }
  return 0;
}

TEST(ThreadPool, AForkDuringARegionGivesTheChildAFreshPool) {
  // fork() copies only the forking thread. Here the parent is mid-region: its worker holds share 1,
  // its caller holds the pool's lock, and share 0's exception is kept for rethrow. The child (forked
  // from a third thread) must start its own workers, run every share of its regions once, never
  // see the parent's exception, and still get its own (pthread_atfork → Pool::forget_workers).
  if (usable_cpus() < 2) GTEST_SKIP() << "one usable CPU: regions of 2 are OpenMP regions (the pool's rule)";
  std::atomic<bool> share1_holding{false}, share0_thrown{false}, release{false};
  std::atomic<int> share1_runs{0};
  std::string parent_caught;
  std::thread region([&] {
    try {
      ops::cpu::parallel_region(2, [&](int t, int) {
        if (t == 0) {
          // Share 1 has started: by the worker (the caller claims it only after share 0 returns).
          while (!share1_holding.load()) std::this_thread::yield();
          share0_thrown = true;
          throw std::runtime_error("parent");
        }
        ++share1_runs;
        share1_holding = true;
        while (!release.load()) std::this_thread::yield();
      });
    } catch (const std::runtime_error& e) {
      parent_caught = e.what();
    }
  });
  // (A deadline, so that a share 1 that never starts fails the test instead of hanging it.)
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10); !share0_thrown.load();) {
    if (std::chrono::steady_clock::now() > until) {
      release = true;
      region.join();
      FAIL() << "share 1 did not start within 10 s";
    }
    std::this_thread::yield();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the exception is kept by now (FirstError::run)
  const int child = in_child([] {
    bool worker_ran = false;
    if (const int rc = two_share_regions(2000, &worker_ran); rc != 0) return rc;
    if (!worker_ran) return 2;  // the child never got a worker of its own
    std::string what;
    try {
      ops::cpu::parallel_region(2, [](int t, int) {
        if (t == 1) throw std::runtime_error("child");
      });
    } catch (const std::runtime_error& e) {
      what = e.what();
    }
    if (what == "parent") return 3;
    return what == "child" ? 0 : 4;
  });
  release = true;
  region.join();
  EXPECT_EQ(child, 0) << "1x: a share of region x ran other than once; 2: no worker ran a share; 3: the parent's "
                         "exception came out; 4: the child's exception was lost; 100: the child threw";
  EXPECT_EQ(parent_caught, "parent");
  EXPECT_EQ(share1_runs.load(), 1);
}

TEST(ThreadPool, WhenTheOsRefusesAWorkerTheCallerRunsItsShare) {
  // A process at its thread limit (EAGAIN from pthread_create): the pool runs with fewer workers and
  // the caller takes the shares that have no thread; once threads can be made again, the next
  // region starts its worker. In a child, whose pool has no workers yet (fork), with thread stacks
  // made too large to map (pthread_setattr_default_np: std::thread's default attributes).
  if (usable_cpus() < 2) GTEST_SKIP() << "one usable CPU: regions of 2 are OpenMP regions (the pool's rule)";
  const int child = in_child([] {
    pthread_attr_t huge, normal;
    if (pthread_getattr_default_np(&normal) != 0 || pthread_attr_init(&huge) != 0 ||
        pthread_attr_setstacksize(&huge, std::size_t{1} << 46) != 0 || pthread_setattr_default_np(&huge) != 0)
      return 1;
    bool refused = false;
    try {
      std::thread probe([] {});
      probe.join();
    } catch (const std::system_error&) {
      refused = true;
    }
    if (!refused) return 77;  // this system maps 64 TiB stacks: nothing to test
    bool worker_ran = false;
    if (const int rc = two_share_regions(200, &worker_ran); rc != 0) return rc;
    if (worker_ran) return 2;  // no worker can exist
    if (pthread_setattr_default_np(&normal) != 0) return 1;
    if (const int rc = two_share_regions(2000, &worker_ran); rc != 0) return rc;
    return worker_ran ? 0 : 3;
  });
  if (child == 77) GTEST_SKIP() << "thread creation could not be made to fail here";
  EXPECT_EQ(child, 0) << "1: attribute calls failed; 1x: a share of region x ran other than once; 2: a share ran "
                         "on a thread that should not exist; 3: no worker once threads could be made again; 100: "
                         "the child threw";
}

TEST(ThreadPool, AnExceptionInAShareReachesTheCallerAfterEveryShareRan) {
  // A worker thread's exception (std::bad_alloc from a scratch buffer that cannot grow) must reach
  // the caller (MambaModel::forward turns it into kIo), not terminate the process; whichever share
  // throws, the others still run once, and the next region neither rethrows it nor misses a share.
  // 8 and 33 threads exceed the CI machine's 2 CPUs: the OpenMP path keeps it too.
  for (int nt : {2, 3, 8, 33}) {
    for (int thrower : {0, nt - 1}) {
      for (int rep = 0; rep < 50; ++rep) {
        std::vector<std::atomic<int>> hits(static_cast<std::size_t>(nt));
        bool caught = false;
        try {
          ops::cpu::parallel_region(nt, [&](int t, int) {
            ++hits[static_cast<std::size_t>(t)];
            if (t == thrower) throw std::bad_alloc();
          });
        } catch (const std::bad_alloc&) {
          caught = true;
        }
        ASSERT_TRUE(caught) << "nt " << nt << ", share " << thrower << " threw, rep " << rep;
        for (int t = 0; t < nt; ++t) ASSERT_EQ(hits[static_cast<std::size_t>(t)].load(), 1) << "nt " << nt << ", share " << t;
        std::vector<int> after(static_cast<std::size_t>(nt), 0);
        EXPECT_NO_THROW(ops::cpu::parallel_region(nt, [&](int t, int) { ++after[static_cast<std::size_t>(t)]; }));
        for (int t = 0; t < nt; ++t) ASSERT_EQ(after[static_cast<std::size_t>(t)], 1) << "the region after, nt " << nt;
      }
    }
  }
  // Every share throwing: one exception comes out (the first), of the type thrown.
  EXPECT_THROW(ops::cpu::parallel_region(2, [&](int t, int) { throw std::runtime_error(std::to_string(t)); }),
               std::runtime_error);
}

TEST(ThreadPool, TheFirstExceptionComesOutOnlyAfterASlowShareFinished) {
  // Share 0 throws at once, the others 20 ms later: the caller returns only once every share has
  // finished (their captures must outlive them), with share 0's exception, not a later one.
  for (int nt : {2, 3, 8}) {
    for (int rep = 0; rep < 5; ++rep) {
      std::atomic<int> finished{0};
      std::string what;
      try {
        ops::cpu::parallel_region(nt, [&](int t, int) {
          if (t == 0) throw std::runtime_error("0");
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          ++finished;
          throw std::runtime_error(std::to_string(t));
        });
      } catch (const std::runtime_error& e) {
        what = e.what();
      }
      ASSERT_EQ(finished.load(), nt - 1) << "nt " << nt << ": returned before every share finished";
      ASSERT_EQ(what, "0") << "nt " << nt << ": not the first exception";
    }
  }
}

TEST(ThreadPool, AnExceptionOfAnyTypeReachesTheCaller) {
  for (int nt : {2, 3, 8})
    for (int rep = 0; rep < 20; ++rep)
      EXPECT_THROW(ops::cpu::parallel_region(nt, [&](int t, int) {
                     if (t == nt - 1) throw 42;  // not a std::exception
                   }),
                   int);
}

TEST(ThreadPool, AnExceptionInANestedRegionReachesTheOuterCaller) {
  std::atomic<int> outer_shares{0};
  EXPECT_THROW(ops::cpu::parallel_region(2, [&](int t, int) {
                 ++outer_shares;
                 ops::cpu::parallel_region(4, [&](int, int) {  // body(0, 1) on this thread
                   if (t == 1) throw std::bad_alloc();
                 });
               }),
               std::bad_alloc);
  EXPECT_EQ(outer_shares.load(), 2);
}

TEST(ThreadPool, AThrowingTaskReachesTheCallerAndTheOtherThreadsGoOn) {
  const int saved = ops::num_threads();
  for (int threads : {1, 2, 5}) {
    ops::set_num_threads(threads);
    const std::int64_t n = 64;
    std::vector<std::atomic<int>> count(static_cast<std::size_t>(n));
    EXPECT_THROW(ops::parallel_tasks(n, [&](std::int64_t i) {
                   ++count[static_cast<std::size_t>(i)];
                   if (i == 5) throw std::bad_alloc();
                 }),
                 std::bad_alloc)
        << threads << " threads";
    int ran = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      ASSERT_LE(count[static_cast<std::size_t>(i)].load(), 1) << "task " << i;
      ran += count[static_cast<std::size_t>(i)].load();
    }
    EXPECT_EQ(count[5].load(), 1);
    // One thread stops at the throw (tasks 0..5 ran); with more, only the thrower's thread stops
    // claiming and the others take every task left.
    EXPECT_EQ(ran, threads == 1 ? 6 : n) << threads << " threads";
  }
  ops::set_num_threads(saved);
}

}  // namespace
}  // namespace mamba
