// The default precision, Precision::kAuto (issue 5: "the default is the exact path unless the fast
// one meets those numbers"; the bf16 tier meets them, tests Bf16Tier*): it resolves at load to the
// bf16 tier for a checkpoint whose projections are all stored in bf16 on a CPU with the tier, and
// to the exact tier for f32 / f16 checkpoints, q8/q4 checkpoints and other CPUs — and a model
// loaded with it computes bitwise as one loaded with the tier it resolved to.
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include "common/test_util.h"
#include "models/mamba_model.h"
#include "models/model_test_util.h"
#include "models/quantized_check.h"
#include "ops/cpu/cpu_target.h"
#include "ops/ops.h"

namespace mamba {
namespace {

std::string embedded_dir() { return test::source_dir() + "/models/mamba2-books-7m-bpe8k"; }  // all BF16

Precision loaded_precision(const std::string& dir, Precision asked = Precision::kAuto) {
  LoadOptions lo;
  lo.precision = asked;
  auto m = Model::load(dir, lo);
  EXPECT_TRUE(m.ok()) << dir << ": " << m.error().message;
  return m.ok() ? (*m)->precision() : Precision::kAuto;
}

/// Logits of every position of a fixed prompt.
std::vector<float> prompt_logits(Model& m) {
  const std::vector<std::int32_t> ids = {12, 7, 300, 5, 5, 41, 1000, 2};
  State st = m.new_state();
  return test::prefill_all(m, ids, st);
}

TEST(AutoPrecision, IsTheDefaultAndParses) {
  EXPECT_EQ(LoadOptions{}.precision, Precision::kAuto);
  EXPECT_EQ(parse_precision("auto").value(), Precision::kAuto);
  EXPECT_STREQ(precision_name(Precision::kAuto), "auto");
  EXPECT_EQ(parse_precision("AUTO").value(), Precision::kAuto);  // any case, as MAMBA_CPU_TARGET
  EXPECT_EQ(parse_precision("Bf16").value(), Precision::kBF16);
  const auto bad = parse_precision("fp8");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("auto, exact, bf16, int8"), std::string::npos) << bad.error().message;
}

TEST(AutoPrecision, Bf16CheckpointTakesTheBf16TierWhereTheCpuHasIt) {
  const Precision want = ops::bf16_tier_available() ? Precision::kBF16 : Precision::kExact;
  EXPECT_EQ(loaded_precision(embedded_dir()), want);
  // Bitwise the model loaded with the tier named.
  auto a = Model::load(embedded_dir());
  LoadOptions named;
  named.precision = want;
  auto b = Model::load(embedded_dir(), named);
  ASSERT_TRUE(a.ok() && b.ok());
  const std::vector<float> la = prompt_logits(**a), lb = prompt_logits(**b);
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)));
  // And not the other tier's (so the test would see auto picking the wrong one).
  if (want == Precision::kBF16) {
    auto e = Model::load(embedded_dir(), test::exact_tier());
    ASSERT_TRUE(e.ok());
    const std::vector<float> le = prompt_logits(**e);
    EXPECT_GT(test::max_abs(la.data(), le.data(), static_cast<std::int64_t>(la.size())), 0.0);
  }
}

TEST(AutoPrecision, ExactOnTargetsWithoutTheTier) {
  // The baseline target (any x86-64 CPU), as MAMBA_CPU_TARGET=baseline or a CPU without AVX-512 BF16.
  const ops::cpu::CpuTarget saved = ops::cpu::cpu_target();
  ops::cpu::set_cpu_target_for_test(ops::cpu::CpuTarget::kBaseline);
  const Precision p = loaded_precision(embedded_dir());
  ops::cpu::set_cpu_target_for_test(saved);
  EXPECT_EQ(p, Precision::kExact);
}

TEST(AutoPrecision, ExactForF32F16AndQuantizedCheckpoints) {
  MAMBA_REQUIRE_SHARED(shared);
  // f32 and f16 weights: the tier would round the weights too (beyond what its tests bound).
  EXPECT_EQ(loaded_precision(shared + "/fixtures/mamba2-tiny/model"), Precision::kExact);
  EXPECT_EQ(loaded_precision(shared + "/fixtures/mamba1-odd-f16/model"), Precision::kExact);
  // bf16 fixtures take the tier where the CPU has it.
  EXPECT_EQ(loaded_precision(shared + "/fixtures/mamba1-tiny-bf16/model"),
            ops::bf16_tier_available() ? Precision::kBF16 : Precision::kExact);
  // q8: its integer kernels, and dt_proj (float) exact; the int8 tier stays opt-in.
  const test::QuantizedCopy q(embedded_dir(), QuantType::kQ8);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(loaded_precision(q.dir()), Precision::kExact);
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

/// This process's private writable memory (VmData of /proc/self/status, what RLIMIT_DATA counts), in
/// bytes; −1 when unreadable.
std::int64_t vm_data_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmData:", 0) == 0) return std::stoll(line.substr(7)) * 1024;  // "VmData:  1234 kB"
  return -1;
}

/// FallsBackToTheExactTierWhenTheCopyDoesNotFit's child: exits 0 when auto fell back as it should,
/// else with a code that stderr explains.
[[noreturn]] void fall_back_and_exit() {
  auto fail = [](int code, const char* why) {
    std::fprintf(stderr, "fallback child: %s\n", why);
    std::fflush(stderr);
    ::_exit(code);
  };
  // Allocations of 1 MB and more map new memory, so that the copy needs more than the limit allows.
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  const std::int64_t used = vm_data_bytes();
  rlimit old{};
  if (used < 0 || ::getrlimit(RLIMIT_DATA, &old) != 0) fail(1, "no VmData or RLIMIT_DATA");
  rlimit tight = old;
  tight.rlim_cur = static_cast<rlim_t>(used + (6 << 20));
  if (::setrlimit(RLIMIT_DATA, &tight) != 0) fail(1, "setrlimit failed");
  auto fallback = Model::load(embedded_dir());
  if (::setrlimit(RLIMIT_DATA, &old) != 0) fail(1, "setrlimit failed");  // (the forward pass: not under test)
  if (!fallback.ok()) fail(2, fallback.error().message.c_str());
  if ((*fallback)->precision() != Precision::kExact) fail(3, "not the exact tier: the copy fitted");
  if ((*fallback)->precision_reason() != "the bf16 tier's copy of the projections did not fit in memory")
    fail(4, (*fallback)->precision_reason().c_str());
  const std::vector<float> lf = prompt_logits(**fallback);
  auto exact = Model::load(embedded_dir(), test::exact_tier());
  if (!exact.ok()) fail(5, exact.error().message.c_str());
  const std::vector<float> le = prompt_logits(**exact);
  if (lf.empty() || lf.size() != le.size() || std::memcmp(lf.data(), le.data(), lf.size() * sizeof(float)) != 0)
    fail(6, "the logits differ from the exact tier's");
  ::_exit(0);
}

TEST(AutoPrecisionDeathTest, FallsBackToTheExactTierWhenTheCopyDoesNotFit) {
  // MemAvailable said the bf16 tier's copy fits, but the allocation fails (ulimit -d, a cgroup
  // limit below the mount's root, memory another process took since): auto loads the exact tier,
  // which reads the mapped file, says why, and computes bitwise as a model loaded exact. In a child
  // whose RLIMIT_DATA leaves 6 MB above what it uses during the load (an exact load of the embedded
  // model takes ~0.4 MB of it, the bf16 tier's copy ~16 MB); a "threadsafe" death test, i.e. a fresh
  // process: in a plain fork the copies that earlier tests freed stay in malloc's heap, where a new
  // one fits without growing it.
  if (!ops::bf16_tier_available()) GTEST_SKIP() << "auto takes the exact tier on this CPU anyway";
  if (kAddressSanitizer) GTEST_SKIP() << "AddressSanitizer's own mappings count against RLIMIT_DATA";
  if (vm_data_bytes() < 0) GTEST_SKIP() << "no VmData in /proc/self/status";
  // Where RLIMIT_DATA does not bound anonymous mappings (Linux before 4.7, some sandboxes), nothing
  // can make the copy fail: probe it in a child first.
  const pid_t probe = ::fork();
  ASSERT_GE(probe, 0);
  if (probe == 0) {
    rlimit rl{};
    if (::getrlimit(RLIMIT_DATA, &rl) != 0) ::_exit(1);
    rl.rlim_cur = static_cast<rlim_t>(vm_data_bytes() + (6 << 20));
    if (::setrlimit(RLIMIT_DATA, &rl) != 0) ::_exit(1);
    void* p = ::mmap(nullptr, 16 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ::_exit(p == MAP_FAILED ? 0 : 1);
  }
  int probe_status = 0;
  ASSERT_EQ(::waitpid(probe, &probe_status, 0), probe);
  if (!WIFEXITED(probe_status) || WEXITSTATUS(probe_status) != 0)
    GTEST_SKIP() << "RLIMIT_DATA does not bound a 16 MiB mapping here";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(fall_back_and_exit(), ::testing::ExitedWithCode(0), "");
}

// The rule's inputs given directly: the tier's availability, the dtypes, and the memory the tier's
// copy needs (the embedded model's projections: 2 bytes per weight, in bf16 blocks).
TEST(AutoPrecision, RuleAndReasons) {
  auto ck = Checkpoint::open(embedded_dir());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto w = bind_weights(*ck);
  ASSERT_TRUE(w.ok()) << w.error().message;
  const AutoPrecision yes = models::auto_precision_for(*w, true, -1);
  EXPECT_EQ(yes.precision, Precision::kBF16);
  EXPECT_EQ(yes.reason, "bf16 weights, AVX-512 BF16");
  const AutoPrecision no_cpu = models::auto_precision_for(*w, false, -1);
  EXPECT_EQ(no_cpu.precision, Precision::kExact);
  EXPECT_EQ(no_cpu.reason, "no AVX-512 BF16 on this CPU target");
  // The copy: 2 bytes per projection weight, rows padded to 16-row blocks and K to pairs.
  std::int64_t copy = 0;
  for (const LayerWeights& lw : w->layers)
    for (const TensorView* v : {&lw.in_proj, &lw.x_proj, &lw.dt_proj, &lw.out_proj})
      if (!v->empty()) copy += (v->shape[0] + 15) / 16 * 16 * ((v->shape[1] + 1) / 2 * 2) * 2;
  copy += (w->lm_head.shape[0] + 15) / 16 * 16 * ((w->lm_head.shape[1] + 1) / 2 * 2) * 2;
  // The copy and the headroom just fit; a byte less does not.
  EXPECT_EQ(models::auto_precision_for(*w, true, copy + models::kAutoMemoryHeadroom).precision, Precision::kBF16);
  const AutoPrecision no_mem = models::auto_precision_for(*w, true, copy + models::kAutoMemoryHeadroom - 1);
  EXPECT_EQ(no_mem.precision, Precision::kExact);
  EXPECT_NE(no_mem.reason.find("exceed the memory available"), std::string::npos) << no_mem.reason;
  // Memory the caller reserves (LoadOptions::reserve_bytes: the server's state slots and prefix cache) counts too.
  const std::int64_t reserve = std::int64_t{3} << 30;
  EXPECT_EQ(models::auto_precision_for(*w, true, copy + models::kAutoMemoryHeadroom + reserve, reserve).precision, Precision::kBF16);
  const AutoPrecision reserved = models::auto_precision_for(*w, true, copy + models::kAutoMemoryHeadroom + reserve - 1, reserve);
  EXPECT_EQ(reserved.precision, Precision::kExact);
  EXPECT_NE(reserved.reason.find(", 3.22 GB reserved (states, caches) and 512 MiB to spare exceed the memory available"), std::string::npos)
      << reserved.reason;
  // This machine's figure is read (Linux: /proc/meminfo), and what the loader compares with.
  EXPECT_GT(models::mem_available_bytes(), 0);
  // One projection in another dtype: exact, naming it.
  TensorView& v = w->layers[1].out_proj;
  v.dtype = DType::kF32;
  const AutoPrecision f32 = models::auto_precision_for(*w, true, -1);
  EXPECT_EQ(f32.precision, Precision::kExact);
  EXPECT_EQ(f32.reason, "F32 projections");
  // The dtypes are checked before the CPU: the reason names the checkpoint when no CPU would help.
  EXPECT_EQ(models::auto_precision_for(*w, false, -1).reason, "F32 projections");
  v.dtype = DType::kBF16;
  w->lm_head.dtype = DType::kF16;
  EXPECT_EQ(models::auto_precision_for(*w, true, -1).reason, "F16 lm_head");
}

// The memory auto checks the copy against, from fake /proc and /sys files under a directory:
// MemAvailable alone, capped by a cgroup v2 limit's remainder ("max": no cap), by a cgroup v1
// limit's (its "no limit", a number near 2⁶³, leaves MemAvailable), by the smaller of both, and 0
// when usage exceeds the limit; −1 when nothing is readable.
TEST(AutoPrecision, MemoryAvailableReadsMeminfoAndCgroupLimits) {
  // (one directory per process: two builds' test runs may share the temporary directory)
  const std::filesystem::path root =
      std::filesystem::path(::testing::TempDir()) / ("mem_available_fake_" + std::to_string(::getpid()));
  std::filesystem::remove_all(root);
  const auto put = [&](const std::string& rel, const std::string& text) {
    std::filesystem::create_directories((root / rel).parent_path());
    std::ofstream(root / rel) << text;
  };
  EXPECT_EQ(models::mem_available_bytes(root.string()), -1);
  put("proc/meminfo", "MemTotal:       16000000 kB\nMemFree:         1000000 kB\nMemAvailable:    8000000 kB\n");
  EXPECT_EQ(models::mem_available_bytes(root.string()), 8000000LL * 1024);
  put("sys/fs/cgroup/memory.max", "max\n");
  put("sys/fs/cgroup/memory.current", "123456\n");
  EXPECT_EQ(models::mem_available_bytes(root.string()), 8000000LL * 1024);
  put("sys/fs/cgroup/memory.max", "1000000000\n");
  EXPECT_EQ(models::mem_available_bytes(root.string()), 1000000000LL - 123456);
  std::filesystem::remove(root / "sys/fs/cgroup/memory.max");
  put("sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
  put("sys/fs/cgroup/memory/memory.usage_in_bytes", "5000000\n");
  EXPECT_EQ(models::mem_available_bytes(root.string()), 8000000LL * 1024);
  put("sys/fs/cgroup/memory/memory.limit_in_bytes", "2000000000\n");
  EXPECT_EQ(models::mem_available_bytes(root.string()), 2000000000LL - 5000000);
  put("sys/fs/cgroup/memory.max", "1000000000\n");  // both: the smaller remainder
  EXPECT_EQ(models::mem_available_bytes(root.string()), 1000000000LL - 123456);
  put("sys/fs/cgroup/memory/memory.usage_in_bytes", "3000000000\n");  // over its limit
  EXPECT_EQ(models::mem_available_bytes(root.string()), 0);
  // A limit whose usage is unreadable caps nothing; with no meminfo, a cgroup remainder is the figure.
  std::filesystem::remove(root / "sys/fs/cgroup/memory/memory.usage_in_bytes");
  std::filesystem::remove(root / "sys/fs/cgroup/memory.current");
  EXPECT_EQ(models::mem_available_bytes(root.string()), 8000000LL * 1024);
  std::filesystem::remove(root / "proc/meminfo");
  put("sys/fs/cgroup/memory.current", "123456\n");
  EXPECT_EQ(models::mem_available_bytes(root.string()), 1000000000LL - 123456);
  // An address-space limit (ulimit -v): the limit less this process's mapped size (statm: pages).
  const long long page = sysconf(_SC_PAGESIZE);
  put("proc/self/statm", "1000 432 404 5 0 123 0\n");
  put("proc/self/limits", "Limit                     Soft Limit           Hard Limit           Units\n"
                          "Max address space         unlimited            unlimited            bytes\n");
  EXPECT_EQ(models::mem_available_bytes(root.string()), 1000000000LL - 123456);
  put("proc/self/limits", "Limit                     Soft Limit           Hard Limit           Units\n"
                          "Max cpu time              unlimited            unlimited            seconds\n"
                          "Max address space         716800000            unlimited            bytes\n");
  EXPECT_EQ(models::mem_available_bytes(root.string()), 716800000LL - 1000 * page);
  put("proc/self/statm", "999999999 1 1 1 0 1 0\n");  // mapped beyond the limit
  EXPECT_EQ(models::mem_available_bytes(root.string()), 0);
  std::filesystem::remove_all(root);
}

TEST(AutoPrecision, LoadedModelSaysWhy) {
  auto a = Model::load(embedded_dir());
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->precision_reason(), ops::bf16_tier_available() ? "bf16 weights, AVX-512 BF16" : "no AVX-512 BF16 on this CPU target");
  // A reserve no machine has (the largest int64) leaves the exact tier where the CPU would run bf16; a
  // negative one is refused.
  LoadOptions lo;
  lo.reserve_bytes = std::numeric_limits<std::int64_t>::max();
  auto r = Model::load(embedded_dir(), lo);
  ASSERT_TRUE(r.ok()) << r.error().message;
  if (models::mem_available_bytes() >= 0) {  // (where no memory figure is readable, none is checked)
    EXPECT_EQ((*r)->precision(), Precision::kExact);
    if (ops::bf16_tier_available()) {
      EXPECT_NE((*r)->precision_reason().find("GB reserved (states, caches)"), std::string::npos) << (*r)->precision_reason();
    }
  }
  lo.reserve_bytes = -1;
  auto neg = Model::load(embedded_dir(), lo);
  ASSERT_FALSE(neg.ok());
  EXPECT_EQ(neg.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(neg.error().message.find("reserve_bytes -1: expected ≥ 0"), std::string::npos) << neg.error().message;
  auto e = Model::load(embedded_dir(), test::exact_tier());
  ASSERT_TRUE(e.ok());
  EXPECT_EQ((*e)->precision_reason(), "");  // a named tier needs no reason
}

}  // namespace
}  // namespace mamba
