// Sampler: HF transformers logits processors/warpers + OpenAI frequency/presence penalties.
//
// Each step mirrors the HF class named in its comment (transformers/generation/logits_process.py),
// applied to the row restricted to ids < vocab_limit. Probabilities: the terms exp(score − max) in
// fp32 on the vectorised exp (≤ 2 ulp), their sums and the normalisation in double.
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

/// Uniform double in [0, 1) from 53 random bits (platform-independent, unlike
/// std::uniform_real_distribution whose algorithm is implementation-defined).
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

/// A float's bits mapped so that unsigned order is the float order (−0 counts as +0): negative
/// values all bits flipped, others the sign bit set — branch-free (a branch on the sign of random
/// logits mispredicted half the time in the sampler's passes over the vocabulary).
std::uint32_t ordered_bits(float f) {
  f += 0.0f;  // −0 → +0: the comparator below treats them as equal
  std::uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  const std::uint32_t flip = static_cast<std::uint32_t>(static_cast<std::int32_t>(b) >> 31) | 0x80000000u;
  return b ^ flip;
}

/// Candidate sets at least this large are sorted / pre-filtered through radix passes.
constexpr std::size_t kRadixMin = 512;

/// Sorts idx by descending logits[id], ties by ascending id (std::sort with by_score's order, the
/// same permutation). Large candidate sets whose ids are still ascending (no top_k) go through a
/// stable LSD radix sort on the scores' bits over (key, id) pairs: O(n), where the comparison sort
/// of a 50K vocabulary took milliseconds per sampled token. Digits of 11, 11 and 10 bits, their
/// three histograms in one pass, and a digit that every key shares (the sign and exponent bits of
/// logits in a narrow range) is not scattered at all: ~3× faster than 4 passes of 8 bits.
template <class ByScore>
void sort_by_score(std::vector<std::int32_t>& idx, const float* logits, bool ids_ascending, ByScore by_score,
                   std::vector<std::uint64_t> (&keys)[2]) {
  if (!ids_ascending || idx.size() < kRadixMin) {
    std::sort(idx.begin(), idx.end(), by_score);
    return;
  }
  const std::size_t n = idx.size();
  keys[0].resize(n);
  keys[1].resize(n);
  constexpr int kShift[3] = {32, 43, 54}, kBits[3] = {11, 11, 10};
  std::vector<std::uint32_t> count(3 * 2048, 0);
  for (std::size_t j = 0; j < n; ++j) {  // descending score = ascending ~bits; the id rides below
    const std::uint64_t k = (static_cast<std::uint64_t>(~ordered_bits(logits[idx[j]])) << 32) | static_cast<std::uint32_t>(idx[j]);
    keys[0][j] = k;
    for (int d = 0; d < 3; ++d) ++count[std::size_t(d) * 2048 + ((k >> kShift[d]) & ((1u << kBits[d]) - 1))];
  }
  for (int d = 0; d < 3; ++d) {
    std::uint32_t* c = count.data() + std::size_t(d) * 2048;
    const std::uint64_t mask = (1u << kBits[d]) - 1;
    if (c[(keys[0][0] >> kShift[d]) & mask] == n) continue;  // one bucket: the pass would not move a key
    std::uint32_t start = 0;
    for (int b = 0; b < (1 << kBits[d]); ++b) {
      const std::uint32_t m = c[b];
      c[b] = start;
      start += m;
    }
    for (std::uint64_t k : keys[0]) keys[1][c[(k >> kShift[d]) & mask]++] = k;  // stable
    keys[0].swap(keys[1]);
  }
  for (std::size_t j = 0; j < n; ++j) idx[j] = static_cast<std::int32_t>(keys[0][j] & 0xffffffffu);
}

/// The candidates: ids i < n with a finite score (not −inf), ascending. With 0 < k < n (top_k)
/// only those that can be among the k largest: a histogram of the top 12 bits of the scores' order
/// (bucket 0 = the largest scores; −inf alone in bucket 4088) finds the bucket that holds the k-th
/// largest finite score, and ids below that bucket are left out. Top-k then runs its exact selection
/// on ~k candidates instead of the whole vocabulary (the same k-th score, the same kept set).
void candidates(const float* logits, std::int64_t n, std::int64_t k, std::vector<std::int32_t>& idx) {
  idx.clear();
  std::uint32_t last = 4095;
  if (k > 0 && k < n && std::size_t(n) >= kRadixMin) {
    std::vector<std::uint32_t> hist(4 * 4096, 0);  // 4 interleaved histograms: no store-forwarding chains
    std::int64_t i = 0;
    for (; i + 4 <= n; i += 4)
      for (int s = 0; s < 4; ++s) ++hist[std::size_t(s) * 4096 + (~ordered_bits(logits[i + s]) >> 20)];
    for (; i < n; ++i) ++hist[~ordered_bits(logits[i]) >> 20];
    constexpr std::uint32_t kNegInfBucket = 4088;
    std::int64_t cum = 0;
    last = 0;
    for (; last < kNegInfBucket; ++last) {
      cum += hist[last] + hist[4096 + last] + hist[2 * 4096 + last] + hist[3 * 4096 + last];
      if (cum >= k) break;
    }
  }
  for (std::int64_t i = 0; i < n; ++i)
    if (logits[i] != kNegInf && (~ordered_bits(logits[i]) >> 20) <= last) idx.push_back(static_cast<std::int32_t>(i));
}

/// Top-p, min-p and the draw of a large candidate set (no top-k, no typical-p) without sorting it.
/// Each of them walks the candidates in descending score order (ties: ascending id) and stops
/// where a running mass crosses its bound; sorting 50K ids per token cost ~0.5 ms. Here the softmax
/// terms t = exp(score − max) are taken in id order (vectorised), their mass is binned over 4096
/// buckets of the score's order (its top 12 bits: bucket 0 holds the highest scores), a walk over
/// the bucket masses finds the one bucket where the bound falls, and only that bucket is sorted.
/// The same survivors and draws as walking the fully sorted list, up to the order in which the
/// masses are summed (a different rounding of the running sums, ~1e-16 relative).
class ScoreBuckets {
 public:
  static constexpr int kBuckets = 4096;
  /// Candidates idx (ids ascending) with their scores logits[id].
  void build(const std::vector<std::int32_t>& idx, const float* logits) {
    const std::size_t n = idx.size();
    ids_ = idx;
    score_.resize(n);
    for (std::size_t j = 0; j < n; ++j) score_[j] = logits[idx[j]];
    const float mx = score_[std::size_t(ops::argmax(score_.data(), std::int64_t(n)))];
    term_.resize(n);
    ops::exp_shifted(score_.data(), mx, term_.data(), std::int64_t(n));
    bucket_.resize(n);
    for (std::size_t j = 0; j < n; ++j) bucket_[j] = static_cast<std::uint16_t>(~ordered_bits(score_[j]) >> 20);
    bin();
  }
  std::size_t size() const { return ids_.size(); }
  const std::vector<std::int32_t>& ids() const { return ids_; }

  /// TopPLogitsWarper: keeps candidate j iff the mass ranked strictly above it is < top_p (of the total).
  void keep_top_p(double top_p) {
    const double bound = top_p * total_;
    double cum = 0;
    int b = 0;
    while (b < kBuckets && cum + mass_[std::size_t(b)] < bound) cum += mass_[std::size_t(b++)];
    if (b == kBuckets) return;  // (rounding) every candidate's mass above it is < the bound
    // Buckets above b: kept; below: dropped; in b: a sorted prefix, up to and including `last`.
    const std::vector<std::size_t> in_b = sorted_bucket(b);
    std::size_t last = in_b.front();  // cum < bound here, so the first one is kept
    for (std::size_t r = 0; r < in_b.size() && cum < bound; ++r) {
      cum += double(term_[in_b[r]]);
      last = in_b[r];
    }
    const float s_last = score_[last];
    const std::int32_t id_last = ids_[last];
    filter([&](std::size_t j) {
      return bucket_[j] < b || (bucket_[j] == b && (score_[j] > s_last || (score_[j] == s_last && ids_[j] <= id_last)));
    });
  }

  /// MinPLogitsWarper: keeps candidates whose probability is ≥ min_p · the largest.
  void keep_min_p(double min_p) {
    float top = 0.0f;
    for (float t : term_) top = std::max(top, t);
    const double thr = min_p * double(top);
    filter([&](std::size_t j) { return double(term_[j]) >= thr; });
  }

  /// The multinomial draw at u ∈ [0, 1): the first candidate in descending order whose running
  /// mass exceeds u · total (the last one when rounding leaves u · total at the total).
  std::int32_t draw(double u) const {
    const double target = u * total_;
    double cum = 0;
    int b = 0;
    while (b < kBuckets && !(target < cum + mass_[std::size_t(b)])) cum += mass_[std::size_t(b++)];
    if (b == kBuckets) {  // the lowest-ranked candidate
      while (b > 0 && mass_[std::size_t(b - 1)] == 0 && count_[std::size_t(b - 1)] == 0) --b;
      return b == 0 ? ids_.back() : ids_[sorted_bucket(b - 1).back()];
    }
    const std::vector<std::size_t> in_b = sorted_bucket(b);
    for (std::size_t j : in_b) {
      cum += double(term_[j]);
      if (target < cum) return ids_[j];
    }
    return ids_[in_b.back()];
  }

 private:
  void bin() {
    mass_.assign(kBuckets, 0.0);
    count_.assign(kBuckets, 0);
    for (std::size_t j = 0; j < ids_.size(); ++j) {
      mass_[bucket_[j]] += double(term_[j]);
      ++count_[bucket_[j]];
    }
    total_ = 0;
    for (double m : mass_) total_ += m;
  }
  /// Positions of bucket b's candidates, by descending score, ties by ascending id.
  std::vector<std::size_t> sorted_bucket(int b) const {
    std::vector<std::size_t> v;
    v.reserve(count_[std::size_t(b)]);
    for (std::size_t j = 0; j < ids_.size(); ++j)
      if (bucket_[j] == b) v.push_back(j);
    std::sort(v.begin(), v.end(), [&](std::size_t a, std::size_t c) {
      return score_[a] > score_[c] || (score_[a] == score_[c] && ids_[a] < ids_[c]);
    });
    return v;
  }
  template <class Keep>
  void filter(Keep keep) {
    std::size_t w = 0;
    for (std::size_t j = 0; j < ids_.size(); ++j)
      if (keep(j)) {
        ids_[w] = ids_[j];
        score_[w] = score_[j];
        term_[w] = term_[j];
        bucket_[w] = bucket_[j];
        ++w;
      }
    ids_.resize(w);
    score_.resize(w);
    term_.resize(w);
    bucket_.resize(w);
    bin();
  }

  std::vector<std::int32_t> ids_;
  std::vector<float> score_, term_;
  std::vector<std::uint16_t> bucket_;
  std::vector<double> mass_;
  std::vector<std::uint32_t> count_;
  double total_ = 0;
};

}  // namespace

Sampler::Sampler(const SamplingParams& params, std::int64_t vocab_limit)
    : p_(params), vocab_limit_(std::max<std::int64_t>(vocab_limit, 1)) {
  params_status_ = p_.validate();
  if (params_status_.ok() && vocab_limit < 1)
    params_status_ = make_error(ErrorCode::kInvalidArgument, fmt::format("sampler: vocab_limit {} (expected >= 1)", vocab_limit));
  for (const auto& [id, bias] : p_.logit_bias)
    if (params_status_.ok() && id >= vocab_limit)
      params_status_ = make_error(ErrorCode::kInvalidArgument, fmt::format("sampling parameter logit_bias: token id {} is outside the vocabulary [0, {})", id, vocab_limit));
  // A drawn seed has 53 bits: it is reported as a JSON number (TGI's `seed`, `mamba-cli run --json`),
  // which JavaScript and jq hold exactly only below 2^53; a larger one read back from there no
  // longer reproduced the run.
  seed_ = p_.has_seed ? p_.seed : ((static_cast<std::uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}()) >> 11;
  rng_.seed(seed_);
  counts_.assign(static_cast<std::size_t>(vocab_limit_), 0);
  if (!p_.penalties_count_prompt && (p_.frequency_penalty != 0.0f || p_.presence_penalty != 0.0f))
    generated_counts_.assign(static_cast<std::size_t>(vocab_limit_), 0);
}

void Sampler::observe(std::int32_t id) {
  ++observed_;
  if (id < 0 || id >= vocab_limit_) return;
  ++counts_[static_cast<std::size_t>(id)];
  if (!generated_counts_.empty()) ++generated_counts_[static_cast<std::size_t>(id)];
}

void Sampler::observe_prompt(std::int32_t id) {
  ++observed_;
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

  // OpenAI's logit_bias, on the raw logits (a −inf stays −inf; a sum past the float range saturates).
  constexpr float kMax = std::numeric_limits<float>::max();
  bool banned = false;
  for (const auto& [id, bias] : p_.logit_bias) {
    if (id >= n || logits[id] == kNegInf) continue;
    banned |= bias == kNegInf;
    logits[id] = bias == kNegInf ? kNegInf : std::clamp(logits[id] + bias, -kMax, kMax);
  }
  if (banned && logits[ops::argmax(logits.data(), n)] == kNegInf)
    return make_error(ErrorCode::kInvalidArgument, "sampler: logit_bias bans every token (-inf on each id the model could pick)");

  // RepetitionPenaltyLogitsProcessor: tokens seen in the context (prompt + generated).
  // OpenAI-style frequency / presence penalties over the same counts, or over the generated
  // tokens' alone (penalties_count_prompt false).
  const bool rep = p_.repetition_penalty != 1.0f;
  const bool freq = p_.frequency_penalty != 0.0f || p_.presence_penalty != 0.0f;
  const std::vector<std::int32_t>& fc = generated_counts_.empty() ? counts_ : generated_counts_;
  // A penalty far from 1 (any finite one > 0 is accepted, as TGI) can push a finite score past the
  // float range (score / 1e-40): saturated at ±FLT_MAX, which keeps the order HF's fp32 arithmetic
  // means (the penalised ids first or last) without +inf − +inf = NaN probabilities downstream.
  if (rep || freq) {
    for (std::int64_t i = 0; i < n; ++i) {
      const std::int32_t c = counts_[static_cast<std::size_t>(i)];
      if (c == 0) continue;
      float& v = logits[i];
      if (v == kNegInf) continue;  // banned stays banned
      if (rep) v = v < 0.0f ? v * p_.repetition_penalty : v / p_.repetition_penalty;
      const std::int32_t f = fc[static_cast<std::size_t>(i)];
      if (freq && f > 0) {
        // TGI: the frequency count / length (in fp32, as its token_freq /= input_size); OpenAI: the count.
        const float fr = p_.frequency_penalty_per_length ? static_cast<float>(f) / static_cast<float>(observed_) : static_cast<float>(f);
        v -= p_.frequency_penalty * fr + p_.presence_penalty;
      }
      v = std::clamp(v, -kMax, kMax);
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

  // Candidates: ids with a finite (not -inf) score (with top_k, those that can be among the k best).
  auto& idx = scratch_idx_;
  candidates(logits.data(), n, p_.top_k, idx);
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
  // A large candidate set (no top_k) without typical_p: top_p, min_p and the draw by score buckets
  // (ScoreBuckets), as long as the survivors stay large; a small set continues below, sorted.
  bool top_p_done = false, min_p_done = false;
  if (ids_ascending && idx.size() >= kRadixMin && p_.typical_p >= 1.0f) {
    static thread_local ScoreBuckets buckets;
    buckets.build(idx, logits.data());
    if (p_.top_p < 1.0f) buckets.keep_top_p(static_cast<double>(p_.top_p));
    if (p_.min_p > 0.0f) buckets.keep_min_p(static_cast<double>(p_.min_p));
    if (buckets.size() >= kRadixMin) return buckets.draw(uniform01(rng_));
    idx = buckets.ids();  // few survivors: sorted below (ids still ascending)
    top_p_done = min_p_done = true;
  }
  sort_by_score(idx, logits.data(), ids_ascending, by_score, scratch_keys_);  // descending score from here on

  // Softmax over the survivors in their (descending) order: the terms exp(score − max) on the
  // vectorised exp (ops::exp_shifted, ≤ 2 ulp in fp32), summed and normalised in double.
  std::vector<double>& prob = scratch_prob_;
  double softmax_sum = 0;  // Σ of the last softmax()'s terms
  auto softmax = [&] {
    const std::size_t m = idx.size();
    scratch_terms_.resize(m);
    prob.resize(m);
    float* t = scratch_terms_.data();
    for (std::size_t j = 0; j < m; ++j) t[j] = logits[idx[j]];
    ops::exp_shifted(t, t[0], t, static_cast<std::int64_t>(m));
    double sum = 0;
    for (std::size_t j = 0; j < m; ++j) sum += prob[j] = t[j];
    for (auto& q : prob) q /= sum;
    softmax_sum = sum;
  };

  // TopPLogitsWarper: HF removes (ascending order) tokens whose cumulative mass <= 1 - top_p; in
  // descending order that keeps token j iff the mass strictly above it is < top_p.
  if (p_.top_p < 1.0f && !top_p_done) {
    softmax();
    double above = 0;
    std::size_t keep = 0;
    while (keep < idx.size() && above < static_cast<double>(p_.top_p)) above += prob[keep++];
    idx.resize(std::max<std::size_t>(keep, 1));
  }

  // MinPLogitsWarper: drop tokens with prob < min_p · max prob.
  if (p_.min_p > 0.0f && !min_p_done) {
    softmax();
    const double thr = static_cast<double>(p_.min_p) * prob[0];
    std::size_t keep = 1;
    while (keep < idx.size() && prob[keep] >= thr) ++keep;
    idx.resize(keep);
  }

  // TypicalLogitsWarper: order by |−log p − H|, keep the smallest set whose mass reaches typical_p
  // (plus ties of the boundary distance). −log p_j = log Σ − (s_j − max) comes from the scores (no
  // log per token); it grows along idx (descending scores), so the distance falls to a minimum and
  // rises again, and the order by distance is a merge of the two runs on either side of that
  // minimum: no sort (a stable sort of the whole vocabulary with two logs per token had made
  // typical_p sampling ~2× slower than greedy decoding, 5 ms per token over 50K ids).
  if (p_.typical_p < 1.0f) {
    softmax();
    const std::size_t m = idx.size();
    const double mx = logits[idx[0]], log_sum = std::log(softmax_sum);
    auto nlp = [&](std::size_t j) { return log_sum - (static_cast<double>(logits[idx[j]]) - mx); };
    double ent = 0;
    for (std::size_t j = 0; j < m; ++j)
      if (prob[j] > 0) ent += prob[j] * nlp(j);
    auto dist = [&](std::size_t j) { return prob[j] > 0 ? std::abs(nlp(j) - ent) : std::numeric_limits<double>::infinity(); };
    std::size_t lo = 0;  // the candidates [lo, hi) are taken, nearest first
    while (lo < m && nlp(lo) <= ent) ++lo;
    std::size_t hi = lo;
    double cum = 0, bound = std::numeric_limits<double>::infinity();
    while (lo > 0 || hi < m) {
      const std::size_t j = (hi >= m || (lo > 0 && dist(lo - 1) <= dist(hi))) ? --lo : hi++;
      bound = dist(j);  // the distance of the one that brings the mass to typical_p (or the last)
      cum += prob[j];
      if (!(cum < static_cast<double>(p_.typical_p))) break;
    }
    std::size_t w = 0;
    for (std::size_t j = 0; j < m; ++j)
      if (!(dist(j) > bound)) idx[w++] = idx[j];  // still in descending score order
    idx.resize(w);
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
