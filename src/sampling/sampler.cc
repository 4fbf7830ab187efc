// Sampler: HF transformers logits processors/warpers + OpenAI frequency/presence penalties.
//
// Each step mirrors the HF class named in its comment (transformers/generation/logits_process.py),
// applied to the row restricted to ids < vocab_limit. Probabilities are computed in double.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "mamba/sampling.h"
#include "ops/ops.h"

namespace mamba {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// `value` in its own type: a float prints as the user wrote it (min_p = -0.1, not -0.10000000149011612).
template <class T>
Error invalid(const char* name, T value, const char* range) {
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("sampling parameter {} = {} is out of range: must be {}", name, value, range));
}

/// Uniform double in [0, 1) from 53 random bits (platform-independent, unlike
/// std::uniform_real_distribution whose algorithm is implementation-defined).
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

/// A float's bits mapped so that unsigned order is the float order (−0 counts as +0).
std::uint32_t ordered_bits(float f) {
  f += 0.0f;  // −0 → +0: the comparator below treats them as equal
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

/// Sorts idx by descending logits[id], ties by ascending id (std::sort with by_score's order, the
/// same permutation). Large candidate sets whose ids are still ascending (no top_k) go through a
/// stable LSD radix sort on the scores' bits, 4 passes of 8 bits over (key, id) pairs: O(n), where
/// the comparison sort of a 50K vocabulary took milliseconds per sampled token (most of a batched
/// server step's time).
template <class ByScore>
void sort_by_score(std::vector<std::int32_t>& idx, const float* logits, bool ids_ascending, ByScore by_score,
                   std::vector<std::uint64_t> (&keys)[2]) {
  constexpr std::size_t kRadixMin = 512;
  if (!ids_ascending || idx.size() < kRadixMin) {
    std::sort(idx.begin(), idx.end(), by_score);
    return;
  }
  const std::size_t n = idx.size();
  keys[0].resize(n);
  keys[1].resize(n);
  for (std::size_t j = 0; j < n; ++j)  // descending score = ascending ~bits; the id rides below
    keys[0][j] = (static_cast<std::uint64_t>(~ordered_bits(logits[idx[j]])) << 32) | static_cast<std::uint32_t>(idx[j]);
  for (int pass = 0; pass < 4; ++pass) {
    const int shift = 32 + 8 * pass;
    std::size_t count[257] = {};
    for (std::uint64_t k : keys[0]) ++count[((k >> shift) & 0xff) + 1];
    for (int d = 0; d < 256; ++d) count[d + 1] += count[d];
    for (std::uint64_t k : keys[0]) keys[1][count[(k >> shift) & 0xff]++] = k;  // stable
    keys[0].swap(keys[1]);
  }
  for (std::size_t j = 0; j < n; ++j) idx[j] = static_cast<std::int32_t>(keys[0][j] & 0xffffffffu);
}

}  // namespace

Status SamplingParams::validate() const {
  if (!std::isfinite(temperature) || temperature < 0.0f) return invalid("temperature", temperature, "finite and >= 0");
  if (top_k < 0) return invalid("top_k", top_k, ">= 0 (0 = off)");
  if (!(top_p > 0.0f && top_p <= 1.0f)) return invalid("top_p", top_p, "in (0, 1]");
  if (!(min_p >= 0.0f && min_p < 1.0f)) return invalid("min_p", min_p, "in [0, 1)");
  if (!(typical_p > 0.0f && typical_p <= 1.0f)) return invalid("typical_p", typical_p, "in (0, 1]");
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0.0f)
    return invalid("repetition_penalty", repetition_penalty, "finite and > 0 (1 = off)");
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return invalid("frequency_penalty", frequency_penalty, "in [-2, 2]");
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return invalid("presence_penalty", presence_penalty, "in [-2, 2]");
  return {};
}

bool SamplingParams::sampling() const {
  if (temperature == 0.0f) return false;
  return do_sample || temperature != 1.0f || top_k > 0 || top_p < 1.0f || typical_p < 1.0f || min_p > 0.0f;
}

Sampler::Sampler(const SamplingParams& params, std::int64_t vocab_limit)
    : p_(params), vocab_limit_(std::max<std::int64_t>(vocab_limit, 1)) {
  params_status_ = p_.validate();
  if (params_status_.ok() && vocab_limit < 1)
    params_status_ = make_error(ErrorCode::kInvalidArgument, fmt::format("sampler: vocab_limit {} (expected >= 1)", vocab_limit));
  seed_ = p_.has_seed ? p_.seed : (static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  rng_.seed(seed_);
  counts_.assign(static_cast<std::size_t>(vocab_limit_), 0);
  if (!p_.penalties_count_prompt && (p_.frequency_penalty != 0.0f || p_.presence_penalty != 0.0f))
    generated_counts_.assign(static_cast<std::size_t>(vocab_limit_), 0);
}

void Sampler::observe(std::int32_t id) {
  if (id < 0 || id >= vocab_limit_) return;
  ++counts_[static_cast<std::size_t>(id)];
  if (!generated_counts_.empty()) ++generated_counts_[static_cast<std::size_t>(id)];
}

void Sampler::observe_prompt(std::int32_t id) {
  if (id >= 0 && id < vocab_limit_) ++counts_[static_cast<std::size_t>(id)];
}

Result<std::int32_t> Sampler::sample(std::span<float> logits) {
  if (!params_status_.ok()) return params_status_.error();
  const std::int64_t n = std::min<std::int64_t>(vocab_limit_, static_cast<std::int64_t>(logits.size()));
  if (n <= 0) return make_error(ErrorCode::kInvalidArgument, "sampler: empty logits row");
  if (ops::find_non_finite(logits.data(), n) >= 0) {  // rare: tell −inf (allowed) from NaN / +inf
    bool any_finite = false;
    for (std::int64_t i = 0; i < n; ++i) {
      const float v = logits[i];
      if (std::isnan(v) || v == std::numeric_limits<float>::infinity())
        return make_error(ErrorCode::kNumerical, fmt::format("sampler: logit of id {} is {} (model output is not finite)", i, v));
      any_finite |= std::isfinite(v);
    }
    if (!any_finite) return make_error(ErrorCode::kNumerical, "sampler: every logit is -inf");
  }
  for (std::size_t i = static_cast<std::size_t>(n); i < logits.size(); ++i) logits[i] = kNegInf;  // padded rows

  // RepetitionPenaltyLogitsProcessor: tokens seen in the context (prompt + generated).
  // OpenAI-style frequency / presence penalties over the same counts, or over the generated
  // tokens' alone (penalties_count_prompt false).
  const bool rep = p_.repetition_penalty != 1.0f;
  const bool freq = p_.frequency_penalty != 0.0f || p_.presence_penalty != 0.0f;
  const std::vector<std::int32_t>& fc = generated_counts_.empty() ? counts_ : generated_counts_;
  if (rep || freq) {
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int32_t c = counts_[static_cast<std::size_t>(i)];
      if (c == 0) continue;
      float& v = logits[i];
      if (rep) v = v < 0.0f ? v * p_.repetition_penalty : v / p_.repetition_penalty;
      const std::int32_t f = fc[static_cast<std::size_t>(i)];
      if (freq && f > 0) v -= p_.frequency_penalty * static_cast<float>(f) + p_.presence_penalty;
    }
  }

  if (!p_.sampling()) return static_cast<std::int32_t>(ops::argmax(logits.data(), n));  // first maximal id

  // TemperatureLogitsWarper. A temperature so small that score / T overflows (T below ~1e-38 for
  // scores near 1: several ids at +inf, then inf − inf = NaN probabilities, i.e. noise where HF
  // raises) divides score − max instead: the same softmax in exact arithmetic, finite here
  // (the best id 0, the others very negative or −inf), so a tiny T is near-greedy as it should be.
  if (p_.temperature != 1.0f) {
    float largest = 0.0f, top_score = kNegInf;  // largest finite |score|, the best score
    for (std::int64_t i = 0; i < n; ++i) {
      if (logits[i] == kNegInf) continue;
      largest = std::max(largest, std::abs(logits[i]));
      top_score = std::max(top_score, logits[i]);
    }
    const float shift = std::isinf(largest / p_.temperature) ? top_score : 0.0f;  // 0: HF's plain division
    for (std::int64_t i = 0; i < n; ++i) logits[i] = (logits[i] - shift) / p_.temperature;
  }

  // Candidates: ids with a finite (not -inf) score.
  auto& idx = scratch_idx_;
  idx.clear();
  for (std::int64_t i = 0; i < n; ++i)
    if (logits[i] != kNegInf) idx.push_back(static_cast<std::int32_t>(i));
  auto by_score = [&](std::int32_t a, std::int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };

  // TopKLogitsWarper: keep scores >= the k-th largest (ties at the boundary kept, as HF).
  bool ids_ascending = true;
  if (p_.top_k > 0 && static_cast<std::size_t>(p_.top_k) < idx.size()) {
    std::nth_element(idx.begin(), idx.begin() + (p_.top_k - 1), idx.end(), by_score);
    const float kth = logits[idx[static_cast<std::size_t>(p_.top_k - 1)]];
    std::erase_if(idx, [&](std::int32_t i) { return logits[i] < kth; });
    ids_ascending = false;
  }
  sort_by_score(idx, logits.data(), ids_ascending, by_score, scratch_keys_);  // descending score from here on

  std::vector<double> prob(idx.size());
  auto softmax = [&] {
    prob.resize(idx.size());
    const double mx = logits[idx[0]];
    double sum = 0;
    for (std::size_t j = 0; j < idx.size(); ++j) sum += prob[j] = std::exp(static_cast<double>(logits[idx[j]]) - mx);
    for (auto& q : prob) q /= sum;
  };

  // TopPLogitsWarper: HF removes (ascending order) tokens whose cumulative mass <= 1 - top_p; in
  // descending order that keeps token j iff the mass strictly above it is < top_p.
  if (p_.top_p < 1.0f) {
    softmax();
    double above = 0;
    std::size_t keep = 0;
    while (keep < idx.size() && above < static_cast<double>(p_.top_p)) above += prob[keep++];
    idx.resize(std::max<std::size_t>(keep, 1));
  }

  // MinPLogitsWarper: drop tokens with prob < min_p · max prob.
  if (p_.min_p > 0.0f) {
    softmax();
    const double thr = static_cast<double>(p_.min_p) * prob[0];
    std::size_t keep = 1;
    while (keep < idx.size() && prob[keep] >= thr) ++keep;
    idx.resize(keep);
  }

  // TypicalLogitsWarper: sort by |−log p − H|, keep the smallest set whose mass reaches typical_p
  // (plus ties of the boundary score).
  if (p_.typical_p < 1.0f) {
    softmax();
    double ent = 0;
    for (double q : prob) if (q > 0) ent -= q * std::log(q);
    std::vector<std::pair<double, std::size_t>> shifted(idx.size());
    for (std::size_t j = 0; j < idx.size(); ++j)
      shifted[j] = {prob[j] > 0 ? std::abs(-std::log(prob[j]) - ent) : std::numeric_limits<double>::infinity(), j};
    std::stable_sort(shifted.begin(), shifted.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    double cum = 0;
    std::size_t last = 0;
    for (std::size_t j = 0; j < shifted.size(); ++j) {
      cum += prob[shifted[j].second];
      if (cum < static_cast<double>(p_.typical_p)) last = j + 1; else break;
    }
    last = std::min(last, shifted.size() - 1);
    const double bound = shifted[last].first;
    std::vector<std::int32_t> kept;
    for (std::size_t j = 0; j < idx.size(); ++j)
      if (j == shifted[0].second || !(std::abs(-std::log(prob[j]) - ent) > bound)) kept.push_back(idx[j]);
    std::sort(kept.begin(), kept.end(), by_score);
    idx = std::move(kept);
  }

  // Draw from softmax over the survivors (multinomial).
  softmax();
  const double u = uniform01(rng_);
  double cum = 0;
  for (std::size_t j = 0; j < idx.size(); ++j) {
    cum += prob[j];
    if (u < cum) return idx[j];
  }
  return idx.back();  // u within rounding of 1
}

}  // namespace mamba
