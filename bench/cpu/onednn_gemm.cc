// oneDNN matmul timing (see onednn_gemm.h). oneDNN 2.6 v2 API: matmul::desc, then primitive_desc.
#include "cpu/onednn_gemm.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "cpu/cpu_time.h"
#include "ops/cpu/cpu_target.h"

#ifdef MAMBA_HAVE_DNNL
#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace mamba::bench {

const char* gemm_type_name(GemmType t) {
  switch (t) {
    case GemmType::kF32: return "f32";
    case GemmType::kBF16: return "bf16";
    case GemmType::kInt8: return "int8";
  }
  return "?";
}

#ifdef MAMBA_HAVE_DNNL

bool onednn_available() { return true; }

std::string onednn_version() {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

bool onednn_supports(GemmType t) { return t != GemmType::kBF16 || ops::cpu::cpu_has_avx512_bf16(); }

namespace {

using dt = dnnl::memory::data_type;
using tag = dnnl::memory::format_tag;

/// Fills a oneDNN buffer with small non-zero values of its data type (layout-agnostic: every
/// element gets a value from the same short cycle, so no denormals and no all-zero shortcuts).
void fill(dnnl::memory& m, dt type) {
  const std::size_t bytes = m.get_desc().get_size();
  auto* p = static_cast<unsigned char*>(m.get_data_handle());
  switch (type) {
    case dt::f32: {
      auto* f = reinterpret_cast<float*>(p);
      for (std::size_t i = 0; i < bytes / 4; ++i) f[i] = 0.01f * static_cast<float>(static_cast<int>(i % 7) - 3);
      break;
    }
    case dt::bf16: {
      auto* h = reinterpret_cast<std::uint16_t*>(p);
      for (std::size_t i = 0; i < bytes / 2; ++i) h[i] = (i % 3 == 0) ? 0x3c23 : 0xbc23;  // ±0.00995
      break;
    }
    default:  // s8 / u8
      for (std::size_t i = 0; i < bytes; ++i) p[i] = static_cast<unsigned char>(i % 5 + 1);
      break;
  }
}

}  // namespace

std::optional<GemmRate> onednn_gemm(std::int64_t M, std::int64_t K, std::int64_t N, GemmType t, int weight_copies,
                                    double min_seconds) {
  if (!onednn_supports(t)) return std::nullopt;
  try {
    dnnl::engine eng(dnnl::engine::kind::cpu, 0);
    dnnl::stream strm(eng);
    const dt src_t = t == GemmType::kF32 ? dt::f32 : t == GemmType::kBF16 ? dt::bf16 : dt::u8;
    const dt wei_t = t == GemmType::kF32 ? dt::f32 : t == GemmType::kBF16 ? dt::bf16 : dt::s8;
    const dt dst_t = t == GemmType::kInt8 ? dt::s32 : dt::f32;
    const dnnl::memory::desc src_md({M, K}, src_t, tag::ab);
    const dnnl::memory::desc wei_md({K, N}, wei_t, tag::any);  // oneDNN picks its packed layout
    const dnnl::memory::desc dst_md({M, N}, dst_t, tag::ab);
    const dnnl::matmul::desc desc(src_md, wei_md, dst_md);
    const dnnl::matmul::primitive_desc pd(desc, eng);
    dnnl::memory src(pd.src_desc(), eng), dst(pd.dst_desc(), eng);
    fill(src, src_t);
    std::vector<dnnl::memory> weights;
    for (int c = 0; c < std::max(1, weight_copies); ++c) {
      weights.emplace_back(pd.weights_desc(), eng);
      fill(weights.back(), wei_t);
    }
    dnnl::matmul mm(pd);
    auto call = [&](std::size_t c) {
      mm.execute(strm, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights[c]}, {DNNL_ARG_DST, dst}});
      strm.wait();
    };
    call(0);  // warm-up: thread pool, kernel JIT
    GemmRate r;
    r.impl = pd.impl_info_str();
    r.seconds = 1e30;
    double total = 0;
    const double cpu0 = process_cpu_seconds();
    const auto start = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < 3 || total < min_seconds; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      call(i % weights.size());
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      r.seconds = std::min(r.seconds, s);
      total += s;
      if (i >= 100000) break;
    }
    r.cpu_share = cpu_share(process_cpu_seconds() - cpu0,
                            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                            omp_get_max_threads(), kGemmShareMinSeconds);
    r.gflops = 2.0 * static_cast<double>(M) * static_cast<double>(K) * static_cast<double>(N) / r.seconds / 1e9;
    return r;
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

#else  // built without oneDNN

bool onednn_available() { return false; }
std::string onednn_version() { return "oneDNN not found"; }
bool onednn_supports(GemmType) { return false; }
std::optional<GemmRate> onednn_gemm(std::int64_t, std::int64_t, std::int64_t, GemmType, int, double) {
  return std::nullopt;
}

#endif

}  // namespace mamba::bench
