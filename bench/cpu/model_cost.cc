// Per-model decode bytes and matmul shapes (see model_cost.h).
#include "cpu/model_cost.h"

#include <map>
#include <set>

namespace mamba::bench {

namespace {

/// Stored bytes of the checkpoint tensor a view points into (views that point into no checkpoint
/// tensor, e.g. converted copies, count their own bytes), plus a quantized view's scales.
class ByteCounter {
 public:
  explicit ByteCounter(const Checkpoint& ckpt) {
    for (const auto& e : ckpt.tensors()) by_data_[e.view.data] = &e;
  }
  double bytes(const TensorView& v) const {
    if (v.empty()) return 0;
    auto it = by_data_.find(v.data);
    double b = static_cast<double>(it == by_data_.end() ? v.nbytes() : it->second->view.nbytes());
    if (v.scales && v.group_size > 0 && v.shape.rank == 2) {
      const std::int64_t groups = (v.shape[1] + v.group_size - 1) / v.group_size;
      b += static_cast<double>(dtype_bytes(v.scale_dtype, static_cast<std::size_t>(v.shape[0] * groups)));
    }
    return b;
  }

 private:
  std::map<const void*, const TensorEntry*> by_data_;
};

}  // namespace

double ModelCost::prefill_flops(std::int64_t tokens) const {
  double f = 0;
  for (const auto& p : projections)
    f += 2.0 * static_cast<double>(p.per_prefill_token ? tokens : 1) * static_cast<double>(p.count) *
         static_cast<double>(p.K) * static_cast<double>(p.N);
  return f;
}

ModelCost model_cost(const Checkpoint& ckpt, const ModelWeights& w) {
  ModelCost c;
  const ByteCounter counter(ckpt);
  const ModelConfig& cfg = ckpt.config();

  // Projections: the per-layer kinds the architecture has, then lm_head.
  const bool mamba1 = cfg.arch != Arch::kMamba2;
  std::vector<std::pair<const char*, TensorView LayerWeights::*>> kinds = {{"in_proj", &LayerWeights::in_proj}};
  if (mamba1) {
    kinds.push_back({"x_proj", &LayerWeights::x_proj});
    kinds.push_back({"dt_proj", &LayerWeights::dt_proj});
  }
  kinds.push_back({"out_proj", &LayerWeights::out_proj});
  for (const auto& [name, member] : kinds) {
    Projection p;
    p.name = name;
    for (const auto& l : w.layers) {
      const TensorView& W = l.*member;
      p.N = W.shape[0];
      p.K = W.shape[1];
      p.weights.push_back(W);
      TensorView bias;
      if (member == &LayerWeights::in_proj) bias = l.in_proj_bias;
      if (member == &LayerWeights::out_proj) bias = l.out_proj_bias;
      if (member == &LayerWeights::dt_proj) bias = l.dt_proj_bias;
      p.biases.push_back(bias);
    }
    p.count = static_cast<std::int64_t>(w.layers.size());
    if (p.count > 0) c.projections.push_back(std::move(p));
  }
  Projection head;
  head.name = "lm_head";
  head.N = w.lm_head.shape[0];
  head.K = w.lm_head.shape[1];
  head.count = 1;
  head.weights = {w.lm_head};
  head.biases = {TensorView{}};
  head.per_prefill_token = false;
  c.projections.push_back(std::move(head));
  for (auto& p : c.projections) {
    c.matmul_params += static_cast<double>(p.count * p.K * p.N);
    p.weight_bytes = counter.bytes(p.weights.front());
  }

  // Bytes read per step: every bound tensor once (deduplicated by address: a tied lm_head is the
  // embedding table).
  std::set<const void*> seen;
  auto add = [&](const TensorView& v) {
    if (!v.empty() && seen.insert(v.data).second) c.step_weight_bytes += counter.bytes(v);
  };
  const bool tied = w.lm_head.data == w.embedding.data;
  if (tied) {
    add(w.embedding);
  } else {
    seen.insert(w.embedding.data);  // only one row per sequence is read
    c.row_bytes = counter.bytes(w.embedding) / static_cast<double>(std::max<std::int64_t>(1, w.embedding.shape[0]));
    add(w.lm_head);
  }
  // The small per-layer tensors (norms, conv, A, D, dt bias) are read from the fp32 copies the
  // model makes at load (models/mamba_model.h LayerParams), not from the checkpoint: 4 bytes each.
  auto add_f32 = [&](const TensorView& v) {
    if (!v.empty() && seen.insert(v.data).second) c.step_weight_bytes += 4.0 * static_cast<double>(v.numel());
  };
  add_f32(w.norm_f);
  for (const auto& l : w.layers) {
    for (const TensorView* v : {&l.in_proj, &l.in_proj_bias, &l.out_proj, &l.out_proj_bias, &l.x_proj, &l.dt_proj,
                                &l.dt_proj_bias})
      add(*v);
    for (const TensorView* v : {&l.norm, &l.conv1d_weight, &l.conv1d_bias, &l.A_log, &l.D, &l.dt_bias, &l.gated_norm})
      add_f32(*v);
  }
  c.state_bytes = static_cast<double>(cfg.state_bytes());
  if (!w.layers.empty()) {
    const DType t = w.layers[0].in_proj.dtype;
    c.weight_dtype = dtype_name(t);
    c.quantized = t == DType::kQ8 || t == DType::kQ4;
  }
  return c;
}

}  // namespace mamba::bench
