// FakeModel: a deterministic stand-in for Model in scheduler tests. Its "state" is one running
// hash per sequence; logits are a fixed function of that hash, so every row depends only on its
// own sequence (batch invariant by construction) and prefill split anywhere equals the unsplit
// prefill. Records prefill pieces and decode batch sizes for the tests to inspect.
#pragma once

#include <cmath>
#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "mamba/model.h"

namespace mamba::test {

class FakeModel : public Model {
 public:
  using Model::prefill;  // the sized-buffer overloads stay visible
  using Model::step;
  explicit FakeModel(std::int64_t vocab = 64, std::int64_t chunk_size = 8) {
    cfg_.arch = Arch::kMamba2;
    cfg_.vocab_size = vocab;
    cfg_.chunk_size = chunk_size;
    cfg_.n_layer = 1;
  }
  const ModelConfig& config() const override { return cfg_; }
  const Checkpoint& checkpoint() const override { std::abort(); }
  std::int64_t logits_width() const override { return cfg_.vocab_size; }
  State new_state() const override {
    State s;
    s.ssm_state.emplace_back(DType::kF32, Shape{2});
    return s;
  }
  Status prefill(std::span<const std::int32_t> tokens, State& state, LogitsMode mode, float* logits) override {
    if (tokens.empty()) return make_error(ErrorCode::kInvalidArgument, "empty");
    {
      std::lock_guard lk(mu_);
      pieces.push_back({state.position, static_cast<std::int64_t>(tokens.size())});
    }
    if (state.position == 0) state.ssm_state[0].data<float>()[1] = static_cast<float>(tokens[0]);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      advance(state, tokens[i]);
      if (mode == LogitsMode::kAll) write_logits(state, logits + i * cfg_.vocab_size);
    }
    if (mode == LogitsMode::kLast) write_logits(state, logits);
    return {};
  }
  Status step(std::span<const std::int32_t> tokens, std::span<State* const> states, float* logits) override {
    {
      std::lock_guard lk(mu_);
      batch_sizes.push_back(static_cast<int>(tokens.size()));
    }
    if (throw_bad_alloc_at_step > 0 && --throw_bad_alloc_at_step == 0) throw std::bad_alloc();
    bool finite = true;
    for (std::size_t b = 0; b < tokens.size(); ++b) {
      advance(*states[b], tokens[b]);
      float* h = states[b]->ssm_state[0].data<float>();
      if (poison_first_token >= 0 && h[1] == static_cast<float>(poison_first_token) && states[b]->position >= poison_position) {
        h[0] = NAN;
        finite = false;
      }
      write_logits(*states[b], logits + b * cfg_.vocab_size);
    }
    // As the real model: every row's logits written, then the error.
    if (!finite) return make_error(ErrorCode::kNumerical, "non-finite logit nan at row ?, id 0");
    return {};
  }

  /// A sequence whose prompt starts with this token gets a NaN state (and NaN logits) in the decode
  /// step that takes it to position poison_position or beyond (a model that overflows for it).
  std::int32_t poison_first_token = -1;
  std::int64_t poison_position = 0;
  /// When > 0: the step() call that brings it to 0 throws std::bad_alloc (a buffer that could not
  /// grow where no error can be returned), before touching any state.
  int throw_bad_alloc_at_step = 0;

  struct Piece {
    std::int64_t start, len;
  };
  std::mutex mu_;
  std::vector<Piece> pieces;
  std::vector<int> batch_sizes;

 private:
  static void advance(State& s, std::int32_t tok) {
    float* h = s.ssm_state[0].data<float>();
    h[0] = std::fmod(h[0] * 31.0f + static_cast<float>(tok) + 1.0f, 100003.0f);
    s.position++;
  }
  void write_logits(const State& s, float* out) const {
    const float h = s.ssm_state[0].data<float>()[0];
    for (std::int64_t j = 0; j < cfg_.vocab_size; ++j) {
      out[j] = 3.0f * std::sin(h * 0.013f + static_cast<float>(j) * 1.7f) + 0.001f * static_cast<float>(j);
    }
  }
  ModelConfig cfg_;
};

}  // namespace mamba::test
