// Batch invariance (the server relies on it): a sequence's logits and state after a decode step
// are bitwise identical whether it is stepped alone or inside a batch of 5 other sequences (any
// position in the batch); and the Model API's argument errors.
#include <gtest/gtest.h>

#include <type_traits>

#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/test_util.h"
#include "mamba/model.h"
#include "mamba/thread_limit.h"
#include "models/model_test_util.h"

namespace mamba {
namespace {

class BatchInvariance : public ::testing::TestWithParam<const char*> {};

TEST_P(BatchInvariance, StepAloneEqualsStepInBatchBitwise) {
  MAMBA_REQUIRE_SHARED(shared);
  auto m = Model::load(shared + "/fixtures/" + GetParam() + "/model");
  ASSERT_TRUE(m.ok()) << m.error().message;
  Model& model = *m.value();
  const std::int64_t V = model.logits_width();
  // Five sequences with different histories (lengths 1..19, so mid-chunk and across chunks).
  const std::vector<std::vector<std::int32_t>> prompts = {
      {5}, {17, 3, 99}, {7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 1, 2}, {400, 12}, {1, 2, 3, 4, 5, 6, 7}};
  std::vector<State> base;
  for (const auto& p : prompts) {
    base.push_back(model.new_state());
    ASSERT_TRUE(model.prefill(p, base.back(), LogitsMode::kNone, nullptr).ok());
  }
  const std::vector<std::int32_t> next = {11, 250, 3, 42, 999};

  // Each sequence alone.
  std::vector<std::vector<float>> alone_logits;
  std::vector<State> alone_states;
  for (std::size_t b = 0; b < prompts.size(); ++b) {
    alone_states.push_back(base[b].clone());
    std::vector<float> row(static_cast<std::size_t>(V));
    State* st[] = {&alone_states.back()};
    ASSERT_TRUE(model.step({&next[b], 1}, st, row.data()).ok());
    alone_logits.push_back(std::move(row));
  }
  // All five in one batch, twice in different orders.
  for (const std::vector<std::size_t>& order : {std::vector<std::size_t>{0, 1, 2, 3, 4}, {3, 0, 4, 2, 1}}) {
    std::vector<State> batch_states;
    for (std::size_t b : order) batch_states.push_back(base[b].clone());
    std::vector<State*> ptrs;
    std::vector<std::int32_t> toks;
    for (std::size_t i = 0; i < order.size(); ++i) {
      ptrs.push_back(&batch_states[i]);
      toks.push_back(next[order[i]]);
    }
    std::vector<float> logits(order.size() * std::size_t(V));
    ASSERT_TRUE(model.step(toks, ptrs, logits.data()).ok());
    for (std::size_t i = 0; i < order.size(); ++i) {
      const std::size_t b = order[i];
      EXPECT_EQ(0, std::memcmp(logits.data() + i * V, alone_logits[b].data(), sizeof(float) * std::size_t(V)))
          << "sequence " << b << " at batch row " << i;
      EXPECT_TRUE(test::state_bitwise_equal(batch_states[i], alone_states[b])) << "sequence " << b;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, BatchInvariance,
                         ::testing::Values("mamba1-odd", "falcon-mamba-tiny", "mamba2-odd", "mamba2-tiny"));

TEST(ModelApi, RejectsBadArguments) {
  MAMBA_REQUIRE_SHARED(shared);
  auto m = Model::load(shared + "/fixtures/mamba2-odd/model");
  ASSERT_TRUE(m.ok()) << m.error().message;
  Model& model = *m.value();
  State st = model.new_state();
  std::vector<float> logits(std::size_t(model.logits_width()) * 2);

  const std::vector<std::int32_t> bad = {3, int(model.logits_width())};
  Status s = model.prefill(bad, st, LogitsMode::kLast, logits.data());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("1000"), std::string::npos) << s.message();
  EXPECT_EQ(st.position, 0) << "a rejected call must not touch the state";

  const std::vector<std::int32_t> id3 = {3};
  const Status bad_mode = model.prefill(id3, st, static_cast<LogitsMode>(7), logits.data());
  ASSERT_FALSE(bad_mode.ok());
  EXPECT_NE(bad_mode.message().find("prefill: mode = 7: expected LogitsMode kNone, kLast or kAll"), std::string::npos) << bad_mode.message();
  EXPECT_EQ(st.position, 0);

  const Status empty_prefill = model.prefill({}, st, LogitsMode::kLast, logits.data());
  ASSERT_FALSE(empty_prefill.ok());
  EXPECT_EQ(empty_prefill.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(empty_prefill.message().rfind("prefill: empty token input", 0), 0u) << empty_prefill.message();
  const Status empty_step = model.step({}, {}, logits.data());  // the error names the call that failed
  ASSERT_FALSE(empty_step.ok());
  EXPECT_EQ(empty_step.message().rfind("step: empty token input", 0), 0u) << empty_step.message();
  const std::vector<std::int32_t> neg = {-1};
  EXPECT_FALSE(model.prefill(neg, st, LogitsMode::kLast, logits.data()).ok());

  State wrong;  // not from this model
  const std::vector<std::int32_t> one = {1};
  EXPECT_EQ(model.prefill(one, wrong, LogitsMode::kLast, logits.data()).error().code, ErrorCode::kInvalidArgument);

  // position: negative, or so large that the call would overflow it, is named (it overflowed to a
  // negative position and the next call blamed the state); a tensor of the right element count but
  // another shape is not this model's state.
  State far = model.new_state();
  far.position = -5;
  const Status neg_pos = model.prefill(one, far, LogitsMode::kLast, logits.data());
  EXPECT_NE(neg_pos.message().find("prefill: state.position is -5"), std::string::npos) << neg_pos.message();
  far.position = std::numeric_limits<std::int64_t>::max() - 1;
  const std::vector<std::int32_t> three = {1, 2, 3};
  const Status big_pos = model.prefill(three, far, LogitsMode::kLast, logits.data());
  EXPECT_NE(big_pos.message().find("state.position is 9223372036854775806"), std::string::npos) << big_pos.message();
  EXPECT_EQ(far.position, std::numeric_limits<std::int64_t>::max() - 1);
  State reshaped = model.new_state();
  const Shape s0 = reshaped.ssm_state[0].shape();
  reshaped.ssm_state[0] = Tensor(DType::kF32, Shape{s0.numel()});
  const Status shape_err = model.prefill(one, reshaped, LogitsMode::kLast, logits.data());
  EXPECT_NE(shape_err.message().find(fmt::format("prefill: state does not match this model: ssm_state[0] has shape [{}], this model's {}",
                                                s0.numel(), s0.str())),
            std::string::npos)
      << shape_err.message();
  State moved = model.new_state();
  State taken = std::move(moved);
  const Status moved_err = model.prefill(one, moved, LogitsMode::kLast, logits.data());  // NOLINT(bugprone-use-after-move): the point
  EXPECT_NE(moved_err.message().find("state does not match this model: it holds no layers (a default-constructed or moved-from State)"),
            std::string::npos)
      << moved_err.message();

  State* twice[] = {&st, &st};
  const std::vector<std::int32_t> two = {1, 2};
  EXPECT_FALSE(model.step(two, twice, logits.data()).ok()) << "same state twice in one batch";
  State* one_state[] = {&st};
  EXPECT_FALSE(model.step(two, one_state, logits.data()).ok()) << "tokens/states count mismatch";
  // named before the logits buffer (sized here for the one state): the count is the mistake
  const Status count_err = model.step(two, one_state, std::span<float>(logits.data(), static_cast<std::size_t>(model.logits_width())));
  EXPECT_EQ(count_err.message(), "step: 2 tokens but 1 states");
}

// The sized-buffer overloads refuse a logits span too small for what the mode writes (before
// anything runs: the state is untouched) and otherwise give the pointer overloads' logits bitwise.
TEST(ModelApi, SizedLogitsBuffersAreChecked) {
  MAMBA_REQUIRE_SHARED(shared);
  auto m = Model::load(shared + "/fixtures/mamba2-odd/model");
  ASSERT_TRUE(m.ok()) << m.error().message;
  Model& model = *m.value();
  const auto V = static_cast<std::size_t>(model.logits_width());
  const std::vector<std::int32_t> three = {1, 2, 3};
  State st = model.new_state();
  std::vector<float> all(3 * V - 1);
  const Status short_all = model.prefill(three, st, LogitsMode::kAll, std::span<float>(all));
  ASSERT_FALSE(short_all.ok());
  EXPECT_EQ(short_all.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(short_all.message().find(fmt::format("prefill: logits buffer of {} floats, expected at least {} (3 rows", 3 * V - 1, 3 * V)),
            std::string::npos)
      << short_all.message();
  EXPECT_EQ(st.position, 0);
  EXPECT_FALSE(model.prefill(three, st, LogitsMode::kLast, std::span<float>()).ok());
  EXPECT_TRUE(model.prefill(three, st, LogitsMode::kNone, std::span<float>()).ok());  // writes no logits
  EXPECT_EQ(st.position, 3);

  State a = model.new_state(), b = model.new_state();
  std::vector<float> via_span(V), via_ptr(V);
  ASSERT_TRUE(model.prefill(three, a, LogitsMode::kLast, std::span<float>(via_span)).ok());
  ASSERT_TRUE(model.prefill(three, b, LogitsMode::kLast, via_ptr.data()).ok());
  EXPECT_EQ(std::memcmp(via_span.data(), via_ptr.data(), V * sizeof(float)), 0);

  const std::vector<std::int32_t> next = {4, 5};
  State* both[] = {&a, &b};
  std::vector<float> two_rows(2 * V - 1);
  const Status short_step = model.step(next, both, std::span<float>(two_rows));
  ASSERT_FALSE(short_step.ok());
  EXPECT_NE(short_step.message().find("step: logits buffer of"), std::string::npos) << short_step.message();
  EXPECT_EQ(a.position, 3);
  two_rows.resize(2 * V);
  ASSERT_TRUE(model.step(next, both, std::span<float>(two_rows)).ok());
  EXPECT_EQ(a.position, 4);
}

TEST(ModelApi, ThreadCountAboveTheLimitIsRefusedAtLoad) {
  // 100000 threads crashed the OpenMP runtime; the limit is checked before any thread starts.
  MAMBA_REQUIRE_SHARED(shared);
  for (int bad : {kMaxThreads + 1, 100000, -1}) {
    LoadOptions lo;
    lo.threads = bad;
    auto m = Model::load(shared + "/fixtures/mamba2-odd/model", lo);
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_EQ(m.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(m.error().message.find("threads = " + std::to_string(bad)), std::string::npos) << m.error().message;
    EXPECT_NE(m.error().message.find("1024"), std::string::npos) << m.error().message;
  }
  // The default (0) follows OMP_NUM_THREADS: above the limit it is refused too (it was clamped to
  // 1024 silently); an explicit count still wins over it.
  const char* old = std::getenv("OMP_NUM_THREADS");
  const std::string saved = old ? old : "";
  setenv("OMP_NUM_THREADS", "100000", 1);
  auto m = Model::load(shared + "/fixtures/mamba2-odd/model");
  LoadOptions one;
  one.threads = 1;
  auto explicit_count = Model::load(shared + "/fixtures/mamba2-odd/model", one);
  if (old) setenv("OMP_NUM_THREADS", saved.c_str(), 1);
  else unsetenv("OMP_NUM_THREADS");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.error().message.find("OMP_NUM_THREADS = 100000: expected 1 to 1024 threads"), std::string::npos) << m.error().message;
  EXPECT_TRUE(explicit_count.ok()) << explicit_count.error().message;
}

/// A copy of a fixture (config.json + model.safetensors) in a temp dir `dir_name`, with element
/// `index` of the F32 tensor whose name contains `name_part` (the first such) set to `value`.
std::filesystem::path patched_copy(const std::string& src_dir, const std::string& dir_name, const std::string& name_part,
                                   std::size_t index, float value) {
  namespace fs = std::filesystem;
  const fs::path src(src_dir), dir = fs::path(testing::TempDir()) / dir_name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(src / f, dir / f);
  std::string bytes = test::read_file((dir / "model.safetensors").string());
  std::uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  const auto header = nlohmann::json::parse(bytes.substr(8, n));
  std::string name;
  for (const auto& [key, v] : header.items())
    if (name.empty() && key.find(name_part) != std::string::npos) name = key;
  EXPECT_FALSE(name.empty()) << name_part;
  EXPECT_EQ(header[name]["dtype"], "F32") << name;
  const std::size_t off = 8 + n + header[name]["data_offsets"][0].get<std::size_t>() + 4 * index;
  std::memcpy(bytes.data() + off, &value, 4);
  std::ofstream((dir / "model.safetensors").string(), std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  return dir;
}

/// The status of a 3-token prefill (logits of the last row) of the model in `dir`; the load must succeed.
Status prefill_three_tokens(const std::filesystem::path& dir) {
  auto m = Model::load(dir.string());
  EXPECT_TRUE(m.ok()) << m.error().message;
  if (!m.ok()) return m.error();
  State st = m.value()->new_state();
  std::vector<float> logits(std::size_t(m.value()->logits_width()));
  const std::vector<std::int32_t> ids = {1, 2, 3};
  return m.value()->prefill(ids, st, LogitsMode::kLast, logits.data());
}

// A weight that makes the logits non-finite is reported as kNumerical, never returned silently.
TEST(ModelApi, NonFiniteLogitsAreAnError) {
  MAMBA_REQUIRE_SHARED(shared);
  // lm_head.weight[0, 0] (F32) = +inf in a copy.
  const auto dir = patched_copy(shared + "/fixtures/mamba2-odd/model", "mamba_nonfinite_model", "lm_head.weight", 0, INFINITY);
  const Status s = prefill_three_tokens(dir);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kNumerical) << s.message();
  EXPECT_NE(s.message().find("id 0"), std::string::npos) << s.message();
  std::filesystem::remove_all(dir);
}

// A NaN in dt's bias (Mamba-1's dt_proj.bias, Mamba-2's dt_bias) reaches the logits and is reported:
// the softplus clamp once turned a NaN Δ into 0, and the channel silently skipped every token.
TEST(ModelApi, NaNDtBiasIsANumericalErrorNotASkippedChannel) {
  MAMBA_REQUIRE_SHARED(shared);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const auto& [fixture, tensor] : {std::pair{"mamba1-odd", "layers.0.mixer.dt_proj.bias"},
                                        std::pair{"mamba2-odd", "layers.0.mixer.dt_bias"}}) {
    const auto dir = patched_copy(shared + "/fixtures/" + fixture + "/model", "mamba_nan_dt_model", tensor, 1, nan);
    const Status s = prefill_three_tokens(dir);
    ASSERT_FALSE(s.ok()) << fixture;
    EXPECT_EQ(s.error().code, ErrorCode::kNumerical) << s.message();
    std::filesystem::remove_all(dir);
  }
}

// An A_log whose A = −exp(A_log) is not finite is refused at load, naming the tensor (the scan
// kernels rely on a finite A).
TEST(ModelApi, NonFiniteALogIsRefusedAtLoad) {
  MAMBA_REQUIRE_SHARED(shared);
  // Layer 0's A_log element 3 = 100: exp(100) overflows fp32, A = −inf.
  const auto dir = patched_copy(shared + "/fixtures/mamba1-odd/model", "mamba_bad_alog_model", "layers.0.mixer.A_log", 3, 100.0f);
  auto m = Model::load(dir.string());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.error().code, ErrorCode::kNumerical) << m.error().message;
  // Named as "DIR: layer 0 mixer.A_log" (it read "tensor DIR: layer 0 …", the folder called a tensor).
  EXPECT_EQ(m.error().message.rfind(dir.string() + ": layer 0 mixer.A_log: element 3 gives A", 0), 0u) << m.error().message;
  std::filesystem::remove_all(dir);
}

// One Model shared by 4 threads, each with its own State (prefill then steps): the calls are
// serialised inside the Model, so each thread gets bitwise what it gets alone (it crashed: the
// threads wrote the model's scratch buffers at once).
TEST(ModelApi, OneModelSharedByThreadsGivesEachThreadItsOwnResults) {
  MAMBA_REQUIRE_SHARED(shared);
  auto m = Model::load(shared + "/fixtures/mamba2-odd/model");
  ASSERT_TRUE(m.ok()) << m.error().message;
  Model& model = *m.value();
  const std::int64_t V = model.logits_width();
  auto run = [&](int seed, std::vector<float>& out) {
    std::vector<std::int32_t> ids(150);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = std::int32_t((i * 7 + std::size_t(seed) * 13) % std::size_t(V));
    State st = model.new_state();
    std::vector<float> row(static_cast<std::size_t>(V));
    if (!model.prefill(ids, st, LogitsMode::kLast, row.data()).ok()) return;
    out = row;
    for (int k = 0; k < 20; ++k) {
      const std::int32_t next[] = {test::argmax(row.data(), V)};
      State* sp[] = {&st};
      if (!model.step(next, sp, row.data()).ok()) return;
      out.insert(out.end(), row.begin(), row.end());
    }
  };
  std::vector<std::vector<float>> alone(4), shared_run(4);
  for (int t = 0; t < 4; ++t) run(t, alone[std::size_t(t)]);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) threads.emplace_back([&, t] { run(t, shared_run[std::size_t(t)]); });
  for (auto& th : threads) th.join();
  for (std::size_t t = 0; t < 4; ++t) {
    ASSERT_EQ(alone[t].size(), std::size_t(21 * V)) << t;
    EXPECT_EQ(shared_run[t], alone[t]) << "thread " << t;
  }
}

// Move-only as documented: std::is_copy_constructible was true (an implicit copy that failed to
// compile deep in libstdc++), which misleads generic code.
static_assert(!std::is_copy_constructible_v<State> && !std::is_copy_assignable_v<State>);
static_assert(std::is_nothrow_move_constructible_v<State> && std::is_nothrow_move_assignable_v<State>);

TEST(ModelApi, StateResetCloneAndSize) {
  MAMBA_REQUIRE_SHARED(shared);
  auto m = Model::load(shared + "/fixtures/mamba2-tiny/model");
  ASSERT_TRUE(m.ok()) << m.error().message;
  Model& model = *m.value();
  const ModelConfig& c = model.config();
  State st = model.new_state();
  EXPECT_EQ(st.nbytes(), c.state_bytes());
  EXPECT_EQ(st.ssm_state[0].shape(), (Shape{c.n_heads, c.head_dim, c.d_state}));
  EXPECT_EQ(st.conv_state[0].shape(), (Shape{c.conv_channels(), c.d_conv - 1}));
  const std::vector<std::int32_t> ids = {5, 6, 7};
  std::vector<float> a(std::size_t(model.logits_width())), b(a.size());
  ASSERT_TRUE(model.prefill(ids, st, LogitsMode::kLast, a.data()).ok());
  State copy = st.clone();
  EXPECT_TRUE(test::state_bitwise_equal(copy, st));
  st.reset();
  EXPECT_EQ(st.position, 0);
  EXPECT_TRUE(test::state_bitwise_equal(st, model.new_state()));
  ASSERT_TRUE(model.prefill(ids, st, LogitsMode::kLast, b.data()).ok());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(float) * a.size())) << "reset state = fresh state";
}

}  // namespace
}  // namespace mamba
