// Sampling: parameter validation, each logits processor's effect, seed reproducibility, and a
// chi-square check that draws follow the (warped) softmax distribution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "mamba/sampling.h"

namespace mamba {
namespace {

std::vector<float> random_logits(std::mt19937& g, int n) {
  std::normal_distribution<float> d(0.0f, 2.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = d(g);
  return v;
}

std::int32_t draw(Sampler& s, std::vector<float> logits) {  // by value: sample() scribbles
  auto r = s.sample(logits);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : -1;
}

SamplingParams seeded(std::uint64_t seed = 42) {
  SamplingParams p;
  p.has_seed = true;
  p.seed = seed;
  return p;
}

TEST(SamplingParams, ValidationNamesTheParameter) {
  struct Case { const char* name; SamplingParams p; };
  std::vector<Case> cases;
  auto add = [&](const char* name, auto set) { SamplingParams p; set(p); cases.push_back({name, p}); };
  add("temperature", [](SamplingParams& p) { p.temperature = -0.5f; });
  add("temperature", [](SamplingParams& p) { p.temperature = NAN; });
  add("top_k", [](SamplingParams& p) { p.top_k = -1; });
  add("top_p", [](SamplingParams& p) { p.top_p = 0.0f; });
  add("top_p", [](SamplingParams& p) { p.top_p = 1.5f; });
  add("min_p", [](SamplingParams& p) { p.min_p = 1.0f; });
  add("typical_p", [](SamplingParams& p) { p.typical_p = 0.0f; });
  add("repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0.0f; });
  add("frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = 3.0f; });
  add("presence_penalty", [](SamplingParams& p) { p.presence_penalty = -2.5f; });
  for (const auto& c : cases) {
    Status st = c.p.validate();
    ASSERT_FALSE(st.ok()) << c.name;
    EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(st.message().find(c.name), std::string::npos) << st.message();
  }
  EXPECT_TRUE(SamplingParams{}.validate().ok());
}

TEST(SamplingParams, WhenSamplingIsOn) {
  SamplingParams p;
  EXPECT_FALSE(p.sampling());
  p.temperature = 0.7f;
  EXPECT_TRUE(p.sampling());
  p.temperature = 0.0f;
  p.do_sample = true;
  EXPECT_FALSE(p.sampling()) << "temperature 0 is greedy";
  SamplingParams k; k.top_k = 5; EXPECT_TRUE(k.sampling());
  SamplingParams t; t.top_p = 0.9f; EXPECT_TRUE(t.sampling());
  SamplingParams m; m.min_p = 0.1f; EXPECT_TRUE(m.sampling());
  SamplingParams y; y.typical_p = 0.9f; EXPECT_TRUE(y.sampling());
}

// Invalid parameters given to the constructor (which cannot fail) make sample() fail, naming the
// parameter, instead of drawing id 0.
TEST(Sampler, InvalidConstructorArgumentsFailEverySample) {
  SamplingParams p;
  p.top_p = 5.0f;
  Sampler s(p, 3);
  std::vector<float> row = {0.0f, 1.0f, 2.0f};
  auto r = s.sample(row);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(r.error().message.find("top_p"), std::string::npos) << r.error().message;
  Sampler z(SamplingParams{}, 0);
  auto rz = z.sample(row);
  ASSERT_FALSE(rz.ok());
  EXPECT_NE(rz.error().message.find("vocab_limit 0"), std::string::npos) << rz.error().message;
}

// A drawn seed is reported as a JSON number: it stays below 2^53, which JavaScript and jq read
// exactly (1250967906885573104 came back as …000 and reproduced another run). Given seeds are kept.
TEST(Sampler, DrawnSeedsFitAJsonDouble) {
  SamplingParams p;
  p.temperature = 1.0f;
  std::uint64_t high_bits = 0;
  for (int i = 0; i < 200; ++i) {
    const std::uint64_t seed = Sampler(p, 8).seed();
    EXPECT_LT(seed, std::uint64_t{1} << 53);
    high_bits |= seed >> 40;
  }
  EXPECT_NE(high_bits, 0u) << "200 draws all below 2^40: not 53 random bits";
  p.has_seed = true;
  p.seed = ~std::uint64_t{0};
  EXPECT_EQ(Sampler(p, 8).seed(), ~std::uint64_t{0});
}

TEST(Sampler, GreedyIsFirstArgmax) {
  Sampler s(SamplingParams{}, 5);
  EXPECT_EQ(draw(s, {0.1f, 3.0f, -1.0f, 3.0f, 2.0f}), 1);
  EXPECT_EQ(draw(s, {-5.0f, -4.0f, -3.0f, -2.0f, -1.0f}), 4);
}

TEST(Sampler, TopK1EqualsGreedy) {
  std::mt19937 g(7);
  SamplingParams p = seeded();
  p.top_k = 1;
  p.temperature = 1.3f;
  Sampler sampled(p, 300);
  Sampler greedy(SamplingParams{}, 300);
  for (int i = 0; i < 200; ++i) {
    auto l = random_logits(g, 300);
    EXPECT_EQ(draw(sampled, l), draw(greedy, l));
  }
}

TEST(Sampler, SameSeedSameDraws) {
  std::mt19937 g(3);
  auto l = random_logits(g, 1000);
  SamplingParams p = seeded(1234);
  p.temperature = 1.5f;
  p.top_p = 0.95f;
  Sampler a(p, 1000), b(p, 1000);
  std::vector<std::int32_t> da, db;
  for (int i = 0; i < 500; ++i) {
    da.push_back(draw(a, l));
    db.push_back(draw(b, l));
  }
  EXPECT_EQ(da, db);
  EXPECT_EQ(a.seed(), 1234u);
  SamplingParams q = p;
  q.seed = 1235;
  Sampler c(q, 1000);
  std::vector<std::int32_t> dc;
  for (int i = 0; i < 500; ++i) dc.push_back(draw(c, l));
  EXPECT_NE(da, dc);
}

TEST(Sampler, UnseededReportsItsSeed) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.do_sample = true;
  Sampler a(p, 10);
  SamplingParams q = seeded(a.seed());
  q.do_sample = true;
  Sampler b(q, 10);
  std::vector<float> l{0, 1, 2, 3, 4, 0, 1, 2, 3, 4};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(draw(a, l), draw(b, l));
}

// Pearson chi-square of `counts` against `expected` probabilities; expected ids must cover all draws.
double chi_square(const std::map<std::int32_t, int>& counts, const std::vector<double>& expected, int n_draws) {
  double chi = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == 0) {
      EXPECT_EQ(counts.count(static_cast<std::int32_t>(i)), 0u) << "id " << i << " has probability 0 but was drawn";
      continue;
    }
    const double e = expected[i] * n_draws;
    const auto it = counts.find(static_cast<std::int32_t>(i));
    const double o = it == counts.end() ? 0 : it->second;
    chi += (o - e) * (o - e) / e;
  }
  return chi;
}

std::vector<double> softmax(const std::vector<float>& l, double temp) {
  std::vector<double> p(l.size());
  double mx = *std::max_element(l.begin(), l.end()), sum = 0;
  for (std::size_t i = 0; i < l.size(); ++i) sum += p[i] = std::exp((l[i] - mx) / temp);
  for (auto& x : p) x /= sum;
  return p;
}

const std::vector<float> kLogits{1.0f, 2.5f, 0.3f, -1.0f, 2.0f, 0.0f, 1.7f, -0.4f};

TEST(Sampler, TemperatureFollowsSoftmaxChiSquare) {
  SamplingParams p = seeded(99);
  p.temperature = 0.7f;
  Sampler s(p, 8);
  const int n = 20000;
  std::map<std::int32_t, int> counts;
  for (int i = 0; i < n; ++i) ++counts[draw(s, kLogits)];
  // 7 degrees of freedom: P(chi2 > 24.32) = 0.001.
  EXPECT_LT(chi_square(counts, softmax(kLogits, 0.7), n), 24.32);
  // A wrong temperature is rejected by the same statistic (the test can fail).
  EXPECT_GT(chi_square(counts, softmax(kLogits, 1.0), n), 24.32);
}

TEST(Sampler, TinyTemperatureIsNearGreedyNotNoise) {
  // score / T overflowed below T ~ 1e-38 (several ids at +inf, NaN probabilities): the draws were
  // noise. Every T > 0 the parameters accept must pick the argmax (id 1) here, ties excepted.
  for (const float t : {1e-30f, 1e-38f, 1e-45f, std::numeric_limits<float>::denorm_min()}) {
    SamplingParams p = seeded(7);
    p.temperature = t;
    ASSERT_TRUE(p.validate().ok()) << t;
    Sampler s(p, 8);
    for (int i = 0; i < 50; ++i) ASSERT_EQ(draw(s, kLogits), 1) << "T = " << t;
    // With a -inf id and negative scores too.
    std::vector<float> neg = {-3.0f, -std::numeric_limits<float>::infinity(), -0.5f, -2.0f};
    Sampler s2(p, 4);
    for (int i = 0; i < 20; ++i) ASSERT_EQ(draw(s2, neg), 2) << "T = " << t;
  }
}

TEST(Sampler, TopPFollowsRenormalisedNucleusChiSquare) {
  SamplingParams p = seeded(5);
  p.top_p = 0.8f;
  Sampler s(p, 8);
  auto probs = softmax(kLogits, 1.0);
  // Nucleus (HF): keep tokens, by descending prob, while the mass strictly above is < top_p.
  std::vector<std::size_t> order(8);
  for (std::size_t i = 0; i < 8; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](auto a, auto b) { return probs[a] > probs[b]; });
  std::vector<double> expected(8, 0.0);
  double above = 0, kept = 0;
  int n_kept = 0;
  for (auto i : order) {
    if (above >= 0.8) break;
    expected[i] = probs[i];
    above += probs[i];
    kept += probs[i];
    ++n_kept;
  }
  for (auto& e : expected) e /= kept;
  ASSERT_EQ(n_kept, 3);  // 2.5, 2.0, 1.7: mass above the 3rd = 0.628 < 0.8, above the 4th = 0.804
  const int n = 20000;
  std::map<std::int32_t, int> counts;
  for (int i = 0; i < n; ++i) ++counts[draw(s, kLogits)];
  EXPECT_LT(chi_square(counts, expected, n), 13.82);  // 2 dof, p = 0.001
  // Only the nucleus is ever drawn (a top_p that did nothing would draw all 8 ids).
  EXPECT_EQ(counts.size(), 3u);
}

// The draw over a large vocabulary (the sampler walks score buckets for big candidate sets, sorts
// small ones) is exactly the documented procedure, written out plainly: candidates sorted by
// descending score then ascending id, top_k keeping scores ≥ the k-th, softmax in double in that
// order, top_p by the mass above, min_p against the largest probability, u = 53 bits of
// mt19937_64(seed), first id whose cumulative probability exceeds u. Ties, −0/+0 and −inf (never a
// candidate) included; 200 draws per configuration, the same ids.
TEST(Sampler, LargeVocabularyDrawsEqualThePlainProcedure) {
  std::mt19937 g(17);
  std::vector<float> logits = random_logits(g, 50280);
  for (std::size_t i = 0; i < logits.size(); i += 97) logits[i] = std::round(logits[i]);  // many ties
  logits[5] = -0.0f;
  logits[6] = 0.0f;
  logits[7] = -std::numeric_limits<float>::infinity();
  struct Cfg {
    float top_p, min_p;
    int top_k;
    float typical_p = 1.0f;
  };
  for (const Cfg c : {Cfg{1.0f, 0.0f, 0}, Cfg{0.9f, 0.0f, 0}, Cfg{1.0f, 0.05f, 0}, Cfg{0.9999f, 1e-4f, 0}, Cfg{1.0f, 0.0f, 40},
                      Cfg{0.95f, 0.0f, 40}, Cfg{1.0f, 0.0f, 3000}, Cfg{1.0f, 0.0f, 0, 0.9f}, Cfg{1.0f, 0.0f, 0, 0.2f},
                      Cfg{0.98f, 0.0f, 3000, 0.95f}}) {
    const float top_p = c.top_p;
    SCOPED_TRACE(::testing::Message() << "top_p " << c.top_p << " min_p " << c.min_p << " top_k " << c.top_k << " typical_p "
                                      << c.typical_p);
    SamplingParams p = seeded(77);
    p.temperature = 0.7f;
    p.top_p = top_p;
    p.min_p = c.min_p;
    p.top_k = c.top_k;
    p.typical_p = c.typical_p;
    Sampler s(p, static_cast<std::int64_t>(logits.size()));
    std::mt19937_64 rng(77);
    std::vector<float> scaled(logits);
    for (auto& v : scaled) v /= 0.7f;
    std::vector<std::int32_t> idx;
    for (std::size_t i = 0; i < scaled.size(); ++i)
      if (scaled[i] != -std::numeric_limits<float>::infinity()) idx.push_back(static_cast<std::int32_t>(i));
    std::sort(idx.begin(), idx.end(), [&](std::int32_t a, std::int32_t b) {
      return scaled[a] > scaled[b] || (scaled[a] == scaled[b] && a < b);
    });
    auto softmax_of = [&](std::size_t m) {
      std::vector<double> q(m);
      double sum = 0;
      for (std::size_t j = 0; j < m; ++j) sum += q[j] = std::exp(double(scaled[idx[j]]) - double(scaled[idx[0]]));
      for (auto& v : q) v /= sum;
      return q;
    };
    std::size_t m = idx.size();
    if (c.top_k > 0 && std::size_t(c.top_k) < m) {
      const float kth = scaled[idx[std::size_t(c.top_k) - 1]];
      while (scaled[idx[m - 1]] < kth) --m;
    }
    if (top_p < 1.0f) {
      const auto q = softmax_of(m);
      double above = 0;
      std::size_t keep = 0;
      while (keep < m && above < double(top_p)) above += q[keep++];
      m = keep;
    }
    if (c.min_p > 0.0f) {
      const auto q = softmax_of(m);
      std::size_t keep = 1;
      while (keep < m && q[keep] >= double(c.min_p) * q[0]) ++keep;
      m = keep;
    }
    if (c.typical_p < 1.0f) {  // HF's TypicalLogitsWarper: |−log q − H| ascending (stable), mass ≥ typical_p
      const auto q = softmax_of(m);
      double ent = 0;
      for (std::size_t j = 0; j < m; ++j) ent -= q[j] > 0 ? q[j] * std::log(q[j]) : 0.0;
      std::vector<std::pair<double, std::size_t>> by_dist(m);
      for (std::size_t j = 0; j < m; ++j)
        by_dist[j] = {q[j] > 0 ? std::abs(-std::log(q[j]) - ent) : std::numeric_limits<double>::infinity(), j};
      std::stable_sort(by_dist.begin(), by_dist.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      double cum = 0;
      std::size_t last = 0;
      for (std::size_t j = 0; j < m; ++j) {
        cum += q[by_dist[j].second];
        if (cum < double(c.typical_p)) last = j + 1; else break;
      }
      const double bound = by_dist[std::min(last, m - 1)].first;
      std::vector<std::int32_t> kept;
      for (std::size_t j = 0; j < m; ++j)
        if (!(by_dist[0].second != j && std::abs(-std::log(q[j]) - ent) > bound)) kept.push_back(idx[j]);
      std::copy(kept.begin(), kept.end(), idx.begin());
      m = kept.size();
    }
    const auto q = softmax_of(m);
    for (int d = 0; d < 200; ++d) {
      const double u = double(rng() >> 11) * 0x1.0p-53;
      double cum = 0;
      std::int32_t want = idx[m - 1];
      for (std::size_t j = 0; j < m; ++j)
        if (u < (cum += q[j])) { want = idx[j]; break; }
      ASSERT_EQ(draw(s, logits), want) << "draw " << d << " of the " << m << " survivors";
    }
  }
}

TEST(Sampler, PaddedIdsNeverDrawn) {
  // Width 128, tokenizer ids < 100; padded rows get the largest logits.
  std::mt19937 g(11);
  auto l = random_logits(g, 128);
  for (int i = 100; i < 128; ++i) l[static_cast<std::size_t>(i)] = 50.0f;
  SamplingParams p = seeded(8);
  p.temperature = 2.0f;
  p.top_k = 0;
  Sampler s(p, 100);
  std::set<std::int32_t> seen;
  for (int i = 0; i < 10000; ++i) {
    const auto id = draw(s, l);
    ASSERT_GE(id, 0);
    ASSERT_LT(id, 100);
    seen.insert(id);
  }
  EXPECT_GT(seen.size(), 50u) << "temperature 2 should spread draws over many ids";
  Sampler greedy(SamplingParams{}, 100);
  EXPECT_LT(draw(greedy, l), 100);
}

TEST(Sampler, NonFiniteLogitsAreAnError) {
  Sampler s(SamplingParams{}, 4);
  std::vector<float> nan{0.0f, NAN, 1.0f, 2.0f};
  auto r = s.sample(nan);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNumerical);
  EXPECT_NE(r.error().message.find("id 1"), std::string::npos) << r.error().message;
  std::vector<float> inf{0.0f, 1.0f, INFINITY, 2.0f};
  EXPECT_FALSE(s.sample(inf).ok());
  std::vector<float> all_neg{-INFINITY, -INFINITY, -INFINITY, -INFINITY};
  EXPECT_FALSE(s.sample(all_neg).ok());
  // A NaN in a padded row (id >= vocab_limit) is not looked at.
  std::vector<float> padded{0.0f, 1.0f, 3.0f, 2.0f, NAN};
  EXPECT_EQ(draw(s, padded), 2);
}

TEST(Sampler, RepetitionPenaltyHFStyle) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  Sampler s(p, 3);
  s.observe(0);
  // positive logit divided: 2.0 → 1.0 < 1.5
  EXPECT_EQ(draw(s, {2.0f, 1.5f, -1.0f}), 1);
  Sampler t(p, 2);
  t.observe(0);
  // negative logit multiplied: -1.0 → -2.0 < -1.5
  EXPECT_EQ(draw(t, {-1.0f, -1.5f}), 1);
  Sampler off(SamplingParams{}, 3);
  off.observe(0);
  EXPECT_EQ(draw(off, {2.0f, 1.5f, -1.0f}), 0);
}

TEST(Sampler, ExtremeRepetitionPenaltyStaysADistribution) {
  // score / 1e-40 overflowed to +inf: with top_p the sampler crashed (inf − inf = NaN mass), without
  // it the draws were noise. The penalised scores saturate instead: the seen ids with positive
  // scores (0 and 2) take all the mass in every sampling path (a small vocabulary's sorted path and
  // a 600-id one's score buckets); the seen negative score (id 3) only goes to ~0.
  struct Path {
    const char* name;
    float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f, typical_p = 1.0f;
    int top_k = 0;
  };
  const Path paths[] = {{"plain"}, {"top_p 0.5", 1.0f, 0.5f}, {"top_p 0.99 + min_p 0.1", 1.0f, 0.99f, 0.1f},
                        {"temperature 0.5", 0.5f}, {"top_k 3", 1.0f, 1.0f, 0.0f, 1.0f, 3},
                        {"typical_p 0.9", 1.0f, 1.0f, 0.0f, 0.9f}};
  for (const std::int64_t vocab : {5, 600}) {
    std::mt19937 g(17);
    std::vector<float> logits = random_logits(g, static_cast<int>(vocab));
    logits[0] = 2.0f;
    logits[1] = 5.0f;  // the best unseen id: below any saturated score
    logits[2] = 1.0f;
    logits[3] = -1.0f;
    for (const Path& path : paths) {
      SamplingParams p = seeded(3);
      p.do_sample = true;
      p.repetition_penalty = 1e-40f;
      p.temperature = path.temperature;
      p.top_p = path.top_p;
      p.min_p = path.min_p;
      p.typical_p = path.typical_p;
      p.top_k = path.top_k;
      ASSERT_TRUE(p.validate().ok()) << path.name;
      Sampler s(p, vocab);
      for (const std::int32_t id : {0, 2, 3}) s.observe(id);
      int seen[3] = {};
      for (int i = 0; i < 200; ++i) {
        const std::int32_t id = draw(s, logits);
        ASSERT_TRUE(id == 0 || id == 2) << path.name << ", vocab " << vocab << ": drew " << id;
        ++seen[id];
      }
      if (path.top_p == 1.0f && path.min_p == 0.0f) {  // both tied at the top: each drawn
        EXPECT_GT(seen[0], 50) << path.name << ", vocab " << vocab;
        EXPECT_GT(seen[2], 50) << path.name << ", vocab " << vocab;
      }
    }
  }
}

TEST(Sampler, FrequencyAndPresencePenalties) {
  SamplingParams f;
  f.frequency_penalty = 0.3f;
  Sampler a(f, 2);
  a.observe(0);
  EXPECT_EQ(draw(a, {1.0f, 0.5f}), 0);  // 1.0 − 0.3 = 0.7 > 0.5
  a.observe(0);
  EXPECT_EQ(draw(a, {1.0f, 0.5f}), 1);  // 1.0 − 0.6 = 0.4 < 0.5
  SamplingParams pr;
  pr.presence_penalty = 0.6f;
  Sampler b(pr, 2);
  b.observe(0);
  b.observe(0);
  b.observe(0);
  EXPECT_EQ(draw(b, {1.0f, 0.5f}), 1);   // 1.0 − 0.6 (once, not per count)
  EXPECT_EQ(draw(b, {1.2f, 0.5f}), 0);   // 1.2 − 0.6 = 0.6 > 0.5
}

// OpenAI's logit_bias: added to the raw logit before the penalties (vLLM's order), for greedy and
// sampled decoding alike; −100 bans, a −inf stays −inf, bad entries are refused by name.
TEST(Sampler, LogitBiasShiftsRawLogitsBeforeThePenalties) {
  SamplingParams p;
  p.logit_bias = {{1, 0.75f}};
  Sampler a(p, 3);
  EXPECT_EQ(draw(a, {2.0f, 1.5f, -1.0f}), 1);  // 1.5 + 0.75 > 2.0
  p.logit_bias = {{0, -100.0f}};
  Sampler ban(p, 3);
  EXPECT_EQ(draw(ban, {50.0f, 1.5f, -1.0f}), 1);
  // Order: the bias, then the repetition penalty (a case where the two orders pick different ids).
  SamplingParams order;
  order.repetition_penalty = 2.0f;
  order.logit_bias = {{0, -3.0f}};
  Sampler o(order, 2);
  o.observe(0);
  // bias first: (1.0 − 3.0) × 2 = −4.0 < −3.5 → id 1; penalty first: 1.0 / 2 − 3.0 = −2.5 > −3.5 → id 0.
  EXPECT_EQ(draw(o, {1.0f, -3.5f}), 1);
  // −inf stays −inf (a +100 bias does not resurrect a banned id).
  p.logit_bias = {{0, 100.0f}};
  Sampler inf(p, 2);
  EXPECT_EQ(draw(inf, {-std::numeric_limits<float>::infinity(), -5.0f}), 1);
  // Sampling: a +100 bias on one id makes it (in effect) certain at temperature 1.
  SamplingParams ps = seeded(7);
  ps.do_sample = true;
  ps.logit_bias = {{2, 100.0f}};
  Sampler sm(ps, 4);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(draw(sm, {3.0f, 2.0f, 1.0f, 0.0f}), 2);
}

TEST(Sampler, LogitBiasRefusesBadEntries) {
  auto message = [](std::vector<std::pair<std::int32_t, float>> bias, std::int64_t vocab) {
    SamplingParams p;
    p.logit_bias = std::move(bias);
    Sampler s(p, vocab);
    std::vector<float> row(static_cast<std::size_t>(vocab), 0.0f);
    auto r = s.sample(row);
    return r.ok() ? std::string("ok") : r.error().message;
  };
  EXPECT_EQ(message({{3, 1.0f}}, 4), "ok");
  EXPECT_NE(message({{4, 1.0f}}, 4).find("token id 4 is outside the vocabulary [0, 4)"), std::string::npos);
  EXPECT_NE(message({{-1, 1.0f}}, 4).find("token id -1 is negative"), std::string::npos);
  EXPECT_NE(message({{1, 100.5f}}, 4).find("must be in [-100, 100]"), std::string::npos);
  EXPECT_NE(message({{1, std::nanf("")}}, 4).find("must be in [-100, 100]"), std::string::npos);
  EXPECT_NE(message({{1, 1.0f}, {2, 1.0f}, {1, -1.0f}}, 4).find("token id 1 is given twice"), std::string::npos);
  EXPECT_NE(message({{1, std::numeric_limits<float>::infinity()}}, 4).find("must be in [-100, 100]"), std::string::npos);
  // −inf bans an id (llama.cpp's ID-inf); banning every id the model could pick is an error.
  constexpr float kInf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(message({{0, -kInf}, {2, -kInf}}, 4), "ok");
  EXPECT_NE(message({{0, -kInf}, {1, -kInf}, {2, -kInf}, {3, -kInf}}, 4).find("bans every token"), std::string::npos);
  SamplingParams p;
  p.logit_bias = {{0, -kInf}};
  Sampler s(p, 3);
  EXPECT_EQ(draw(s, {9.0f, 1.0f, 2.0f}), 2);
  // A whole vocabulary's biases are checked quickly (the duplicate check is not quadratic).
  SamplingParams big;
  for (std::int32_t id = 0; id < 200000; ++id) big.logit_bias.emplace_back(id, 0.5f);
  EXPECT_TRUE(big.validate().ok());
  big.logit_bias.emplace_back(123456, 1.0f);
  EXPECT_NE(big.validate().message().find("token id 123456 is given twice"), std::string::npos);
}

// OpenAI's (and vLLM's) frequency/presence penalties count generated tokens only; TGI's and the
// CLI's count the prompt too. The repetition penalty covers the prompt either way.
TEST(Sampler, PenaltiesCountThePromptOnlyWhenAsked) {
  for (bool count_prompt : {true, false}) {
    SamplingParams f;
    f.frequency_penalty = 0.3f;
    f.penalties_count_prompt = count_prompt;
    Sampler a(f, 2);
    a.observe_prompt(0);
    a.observe_prompt(0);
    // with the prompt counted: 1.0 − 0.6 = 0.4 < 0.5; without it 1.0 stays
    EXPECT_EQ(draw(a, {1.0f, 0.5f}), count_prompt ? 1 : 0) << count_prompt;
    a.observe(0);  // generated: counted either way
    EXPECT_EQ(draw(a, {1.0f, 0.5f}), count_prompt ? 1 : 0) << count_prompt;  // 1.0 − 0.9 = 0.1, or 1.0 − 0.3 = 0.7
    SamplingParams pr;
    pr.presence_penalty = 0.6f;
    pr.penalties_count_prompt = count_prompt;
    Sampler b(pr, 2);
    b.observe_prompt(0);
    EXPECT_EQ(draw(b, {1.0f, 0.5f}), count_prompt ? 1 : 0) << count_prompt;
    SamplingParams r;
    r.repetition_penalty = 2.0f;
    r.penalties_count_prompt = count_prompt;
    Sampler c(r, 3);
    c.observe_prompt(0);
    EXPECT_EQ(draw(c, {2.0f, 1.5f, -1.0f}), 1) << count_prompt;  // 2.0 / 2 = 1.0 < 1.5 either way
  }
}

// TGI's /generate: the frequency penalty scales the token's frequency (count / ids so far), not its
// count. Prompt [0, 0, 0, 1], f = 0.4: TGI 1.0 − 0.4·3/4 = 0.7 > 0.5 − 0.4·1/4 = 0.4;
// OpenAI's count 1.0 − 1.2 = −0.2 < 0.5 − 0.4 = 0.1.
TEST(Sampler, TgiFrequencyPenaltyIsTheCountOverTheLength) {
  for (bool per_length : {true, false}) {
    SamplingParams f;
    f.frequency_penalty = 0.4f;
    f.frequency_penalty_per_length = per_length;
    Sampler a(f, 2);
    for (std::int32_t id : {0, 0, 0, 1}) a.observe_prompt(id);
    EXPECT_EQ(draw(a, {1.0f, 0.5f}), per_length ? 0 : 1) << per_length;
    a.observe(1);  // a generated id lengthens it too: TGI 0 at 3/5, 1 at 2/5 → 0.76 − 0.24 = 0.52 > 0.52 − 0.16;
    // OpenAI's counts 0.76 − 1.2 = −0.44 < 0.52 − 0.8 = −0.28
    EXPECT_EQ(draw(a, {0.76f, 0.52f}), per_length ? 0 : 1) << per_length;
  }
  SamplingParams bad;
  bad.frequency_penalty_per_length = true;
  bad.penalties_count_prompt = false;
  EXPECT_FALSE(bad.validate().ok());
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  // probs 0.5, 0.3, 0.2 → min_p 0.5 keeps prob ≥ 0.25: ids 0 and 1.
  const std::vector<float> l{std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  SamplingParams p = seeded(2);
  p.min_p = 0.5f;
  Sampler s(p, 3);
  std::map<std::int32_t, int> counts;
  for (int i = 0; i < 5000; ++i) ++counts[draw(s, l)];
  EXPECT_EQ(counts.count(2), 0u);
  EXPECT_LT(chi_square(counts, {0.625, 0.375, 0.0}, 5000), 10.83);  // 1 dof, p = 0.001
}

// HF's TopKLogitsWarper keeps every score ≥ the k-th largest: ties at the k-th place all stay.
// probs 0.4, 0.2, 0.2, 0.2 with top_k 2 keep ids 0..3 (1, 2 and 3 tie at the 2nd place).
TEST(Sampler, TopKKeepsTiesAtTheKthScore) {
  const std::vector<float> l{std::log(0.4f), std::log(0.2f), std::log(0.2f), std::log(0.2f), std::log(0.1f)};
  SamplingParams p = seeded(6);
  p.top_k = 2;
  Sampler s(p, 5);
  std::map<std::int32_t, int> counts;
  for (int i = 0; i < 5000; ++i) ++counts[draw(s, l)];
  EXPECT_EQ(counts.count(4), 0u);
  EXPECT_LT(chi_square(counts, {0.4, 0.2, 0.2, 0.2, 0.0}, 5000), 16.27);  // 3 dof, p = 0.001
}

TEST(Sampler, TypicalPKeepsTheTypicalSet) {
  // probs 0.6, 0.2, 0.1, 0.1: entropy 1.089; |−log p − H| = 0.578, 0.521, 1.214, 1.214.
  // Ascending: id1 (cum 0.2), id0 (cum 0.8), ... typical_p 0.5 → keep {1, 0}; 0.15 → keep {1}.
  const std::vector<float> l{std::log(0.6f), std::log(0.2f), std::log(0.1f), std::log(0.1f)};
  SamplingParams p = seeded(4);
  p.typical_p = 0.5f;
  Sampler s(p, 4);
  std::map<std::int32_t, int> counts;
  for (int i = 0; i < 5000; ++i) ++counts[draw(s, l)];
  EXPECT_LT(chi_square(counts, {0.75, 0.25, 0.0, 0.0}, 5000), 10.83);
  p.typical_p = 0.15f;
  Sampler only(p, 4);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(draw(only, l), 1);
}

TEST(LogSoftmax, MatchesDefinitionOverTokenizerIds) {
  const std::vector<float> l{1.0f, 2.0f, 3.0f, 100.0f};  // id 3 is a padded row
  std::vector<float> out(3);
  ASSERT_TRUE(log_softmax(l, 3, out).ok());
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(out[static_cast<std::size_t>(i)], (i + 1) - lse, 1e-6);
  std::vector<float> bad{1.0f, NAN, 0.0f};
  Status st = log_softmax(bad, 3, out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kNumerical);
  EXPECT_FALSE(log_softmax(l, 5, out).ok());
  // Large logits do not overflow.
  const std::vector<float> big{1000.0f, 1000.0f};
  std::vector<float> o2(2);
  ASSERT_TRUE(log_softmax(big, 2, o2).ok());
  EXPECT_NEAR(o2[0], -std::log(2.0), 1e-6);
}

}  // namespace
}  // namespace mamba
