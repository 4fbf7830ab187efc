// Quantized checkpoints (mamba-cli quantize): what the quantizer writes, how the loader fuses codes
// + scales into kQ8/kQ4 views, and clear errors for damaged files (each names file, tensor,
// expected and actual).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/test_util.h"
#include "io/io_test_util.h"
#include "mamba/checkpoint.h"
#include "mamba/quantize.h"
#include "mamba/weights.h"

namespace mamba {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string embedded_dir() { return test::source_dir() + "/models/mamba2-books-7m-bpe8k"; }

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// A quantized copy of the embedded model in a temp dir, plus helpers to damage it.
class QuantizedCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = quantize_checkpoint(embedded_dir(), QuantType::kQ8, q8_dir());
    ASSERT_TRUE(r.ok()) << r.error().message;
    const std::string st = read_file(q8_dir() + "/model.safetensors");
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<std::uint8_t>(st[std::size_t(i)]);
    header_ = json::parse(st.substr(8, n));
    data_ = st.substr(8 + n);
  }
  std::string q8_dir() const { return tmp_.path() + "/q8"; }

  /// A copy of the q8 checkpoint with the header changed by `edit` (data bytes unchanged) and
  /// config.json changed by `edit_config`; returns its directory.
  template <class F, class G = void (*)(json&)>
  std::string damaged(const std::string& name, F edit, G edit_config = [](json&) {}) {
    json h = header_;
    edit(h);
    std::string hs = h.dump();
    const std::string dir = tmp_.path() + "/" + name;
    fs::create_directories(dir);
    tmp_.write(name + "/model.safetensors", test::le(hs.size(), 8) + hs + data_);
    json c = json::parse(read_file(q8_dir() + "/config.json"));
    edit_config(c);
    tmp_.write(name + "/config.json", c.dump());
    return dir;
  }

  test::TempDir tmp_;
  json header_;
  std::string data_;
};

std::string open_error(const std::string& dir) {
  auto ck = Checkpoint::open(dir);
  if (!ck.ok()) return ck.error().message;
  auto w = bind_weights(*ck);
  return w.ok() ? std::string("(loaded)") : w.error().message;
}

const char* kInProj = "backbone.layers.0.mixer.in_proj.weight";

TEST_F(QuantizedCheckpoint, QuantizerOutputLoadsAsQ8Views) {
  auto ck = Checkpoint::open(q8_dir());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  EXPECT_EQ(ck->config().quant_type, "q8");
  EXPECT_EQ(ck->config().quant_group_size, 32);
  auto w = bind_weights(*ck);
  ASSERT_TRUE(w.ok()) << w.error().message;
  auto orig = Checkpoint::open(embedded_dir());
  ASSERT_TRUE(orig.ok());
  auto ow = bind_weights(*orig);
  ASSERT_TRUE(ow.ok());
  const ModelConfig& c = ck->config();
  const TensorView& ip = w->layers[0].in_proj;
  EXPECT_EQ(ip.dtype, DType::kQ8);
  EXPECT_EQ(ip.shape, ow->layers[0].in_proj.shape);  // logical [N, K]
  ASSERT_NE(ip.scales, nullptr);
  EXPECT_EQ(ip.group_size, 32);
  EXPECT_EQ(ip.scale_dtype, DType::kF32);
  EXPECT_EQ(w->layers[0].out_proj.dtype, DType::kQ8);
  EXPECT_EQ(w->embedding.dtype, DType::kQ8);
  EXPECT_EQ(w->lm_head.data, w->embedding.data);  // tied: stored once
  EXPECT_EQ(w->norm_f.dtype, DType::kF32);
  EXPECT_EQ(w->layers[0].A_log.dtype, DType::kF32);
  EXPECT_EQ(w->layers[0].conv1d_weight.dtype, DType::kF32);
  // The scale companions are fused, not listed as tensors of their own.
  EXPECT_EQ(ck->find(std::string(kInProj) + "_scale"), nullptr);
  // Codes dequantize close to the original weights (q8: within half a step of the group scale).
  const auto* codes = static_cast<const std::int8_t*>(ip.data);
  const auto* scales = static_cast<const float*>(ip.scales);
  std::vector<float> orig_row(std::size_t(c.d_model));
  ASSERT_TRUE(convert_to_f32(ow->layers[0].in_proj.data, ow->layers[0].in_proj.dtype, orig_row.size(), orig_row.data()));
  for (std::int64_t k = 0; k < c.d_model; ++k)
    EXPECT_LE(std::fabs(scales[k / 32] * codes[k] - orig_row[std::size_t(k)]), 0.5f * scales[k / 32] * 1.0001f) << k;
  // Metadata and config.
  EXPECT_EQ(header_["__metadata__"]["mamba.cpp.quantization"], "q8");
  EXPECT_EQ(header_["__metadata__"]["mamba.cpp.group_size"], "32");
  EXPECT_EQ(header_[kInProj]["dtype"], "I8");
  EXPECT_EQ(header_[std::string(kInProj) + "_scale"]["dtype"], "F32");
  EXPECT_TRUE(fs::exists(q8_dir() + "/tokenizer.json"));
  EXPECT_TRUE(fs::exists(q8_dir() + "/generation_config.json"));
}

TEST_F(QuantizedCheckpoint, Q4Layout) {
  const std::string dir = tmp_.path() + "/q4";
  auto r = quantize_checkpoint(embedded_dir(), QuantType::kQ4, dir);
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto ck = Checkpoint::open(dir);
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  const TensorEntry* e = ck->find(kInProj);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->view.dtype, DType::kQ4);
  EXPECT_EQ(e->view.nbytes(), std::size_t(e->view.numel() / 2));
  const std::string st = read_file(dir + "/model.safetensors");
  EXPECT_NE(st.find("\"U8\""), std::string::npos);
}

TEST_F(QuantizedCheckpoint, WrongScaleShape) {
  const std::string dir = damaged("bad-scale-shape", [](json& h) {
    auto& s = h[std::string(kInProj) + "_scale"]["shape"];
    s = json::array({s[1], s[0]});
  });
  const std::string err = open_error(dir);
  EXPECT_NE(err.find(std::string(kInProj) + "_scale"), std::string::npos) << err;
  EXPECT_NE(err.find("expected F32 ["), std::string::npos) << err;
}

TEST_F(QuantizedCheckpoint, ScaleDtypeAndCodeDtype) {
  std::string err = open_error(damaged("scale-i32", [](json& h) { h[std::string(kInProj) + "_scale"]["dtype"] = "I32"; }));
  EXPECT_NE(err.find("got I32"), std::string::npos) << err;
  err = open_error(damaged("codes-u8", [](json& h) { h[kInProj]["dtype"] = "U8"; }));
  EXPECT_NE(err.find("expected I8 codes"), std::string::npos) << err;
  EXPECT_NE(err.find(kInProj), std::string::npos) << err;
}

TEST_F(QuantizedCheckpoint, Q8CodeMinus128IsRefused) {
  // Put one −128 code at row 1, column 3 of in_proj (outside q8's [−127, 127]).
  const std::int64_t begin = header_[kInProj]["data_offsets"][0].get<std::int64_t>();
  const std::int64_t K = header_[kInProj]["shape"][1].get<std::int64_t>();
  const std::string good = data_;
  data_[static_cast<std::size_t>(begin + K + 3)] = static_cast<char>(0x80);
  const std::string err = open_error(damaged("code-minus-128", [](json&) {}));
  data_ = good;
  EXPECT_NE(err.find(std::string(kInProj) + "': q8 code -128 at [1, 3]"), std::string::npos) << err;
}

TEST_F(QuantizedCheckpoint, NonFiniteScaleIsRefusedNamingTheTensor) {
  // A NaN / inf scale loaded and gave NaN logits far from its cause; the load names it.
  const std::string sname = std::string(kInProj) + "_scale";
  const std::int64_t begin = header_[sname]["data_offsets"][0].get<std::int64_t>();
  const std::int64_t groups = header_[sname]["shape"][1].get<std::int64_t>();
  const std::string good = data_;
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    std::memcpy(&data_[static_cast<std::size_t>(begin + 4 * (groups + 2))], &bad, 4);  // row 1, group 2
    const std::string err = open_error(damaged(std::isnan(bad) ? "scale-nan" : "scale-inf", [](json&) {}));
    data_ = good;
    EXPECT_NE(err.find(sname + "': scale " + (std::isnan(bad) ? "nan" : "inf") + " at [1, 2] (weights 64..95 of row 1)"),
              std::string::npos)
        << err;
  }
}

TEST_F(QuantizedCheckpoint, MissingScale) {
  const std::string dir = damaged("missing-scale", [](json& h) {
    h["renamed"] = h[std::string(kInProj) + "_scale"];
    h.erase(std::string(kInProj) + "_scale");
  });
  const std::string err = open_error(dir);
  EXPECT_NE(err.find("scale tensor '" + std::string(kInProj) + "_scale' is missing"), std::string::npos) << err;
}

TEST_F(QuantizedCheckpoint, ScaleWithoutCodes) {
  const std::string err = open_error(damaged("orphan-scale", [](json& h) { h[kInProj]["dtype"] = "BOOL"; }));
  EXPECT_NE(err.find("scale tensor '" + std::string(kInProj) + "_scale' has no I8 code tensor"), std::string::npos) << err;
  EXPECT_NE(err.find("stored as BOOL"), std::string::npos) << err;
}

TEST_F(QuantizedCheckpoint, BadMetadata) {
  std::string err = open_error(damaged("meta-q4", [](json& h) { h["__metadata__"]["mamba.cpp.quantization"] = "q4"; }));
  EXPECT_NE(err.find("__metadata__ must say mamba.cpp.quantization = \"q8\""), std::string::npos) << err;
  err = open_error(damaged("meta-missing", [](json& h) { h.erase("__metadata__"); }));
  EXPECT_NE(err.find("(missing)"), std::string::npos) << err;
  err = open_error(damaged("no-qconfig", [](json&) {}, [](json& c) { c.erase("quantization_config"); }));
  EXPECT_NE(err.find("has no quantization_config"), std::string::npos) << err;
  err = open_error(damaged("group-64", [](json&) {}, [](json& c) { c["quantization_config"]["group_size"] = 64; }));
  EXPECT_NE(err.find("\"group_size\" must be 32, got 64"), std::string::npos) << err;
  err = open_error(damaged("gptq", [](json&) {}, [](json& c) { c["quantization_config"]["quant_method"] = "gptq"; }));
  EXPECT_NE(err.find("quant_method \"gptq\" is not supported"), std::string::npos) << err;
  err = open_error(damaged("type-q3", [](json&) {}, [](json& c) { c["quantization_config"]["type"] = "q3"; }));
  EXPECT_NE(err.find("\"type\" must be \"q8\" or \"q4\""), std::string::npos) << err;
}

TEST_F(QuantizedCheckpoint, QuantizeErrors) {
  // Output exists.
  auto r = quantize_checkpoint(embedded_dir(), QuantType::kQ8, q8_dir());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("already exists"), std::string::npos) << r.error().message;
  // Already quantized input.
  r = quantize_checkpoint(q8_dir(), QuantType::kQ4, tmp_.path() + "/again");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("already quantized (q8)"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(tmp_.path() + "/again"));
  // A type that is no enumerator (it wrote a q4 checkpoint).
  r = quantize_checkpoint(embedded_dir(), static_cast<QuantType>(9), tmp_.path() + "/q9");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("type = 9: expected QuantType kQ8 or kQ4"), std::string::npos) << r.error().message;
  EXPECT_FALSE(fs::exists(tmp_.path() + "/q9"));
  // Parent directory missing.
  r = quantize_checkpoint(embedded_dir(), QuantType::kQ8, tmp_.path() + "/no/such/dir");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("does not exist"), std::string::npos) << r.error().message;
  // No temporary directory left behind by the failures.
  for (const auto& e : fs::directory_iterator(tmp_.path())) EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

/// quantize_checkpoint(in, q8, out) in a child process whose files may not grow past `limit`
/// bytes (RLIMIT_FSIZE, SIGXFSZ ignored: writes fail with EFBIG as on a full disk). Returns the
/// error message ("" on success, "child failed" when the child did not report).
std::string quantize_with_file_limit(const std::string& in, const std::string& out, rlim_t limit) {
  int fds[2];
  if (::pipe(fds) != 0) return "pipe failed";
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return "fork failed";
  }
  if (pid == 0) {
    ::close(fds[0]);
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit rl{limit, limit};
    ::setrlimit(RLIMIT_FSIZE, &rl);
    auto r = quantize_checkpoint(in, QuantType::kQ8, out);
    const std::string msg = r.ok() ? "" : r.error().message;
    const bool ok = ::write(fds[1], msg.data(), msg.size()) == static_cast<ssize_t>(msg.size());
    ::_exit(ok ? 0 : 1);
  }
  ::close(fds[1]);
  std::string msg;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, std::size_t(n));
  ::close(fds[0]);
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return "waitpid failed";
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? msg : "child failed";
}

// A write that fails (a full disk; here a file-size limit) says why and names the file as it would
// be in the output, not the temporary directory (removed by then); nothing is left behind. The
// side files (tokenizer, vocab, ...) are copied the same way (std::filesystem::copy_file reported
// a full disk there as "Input/output error").
TEST_F(QuantizedCheckpoint, WriteFailuresNameTheOutputFileAndTheReason) {
  const std::string out = tmp_.path() + "/full";
  std::string err = quantize_with_file_limit(embedded_dir(), out, 1 << 20);
  EXPECT_NE(err.find(out + "/model.safetensors: write failed: File too large"), std::string::npos) << err;
  EXPECT_EQ(err.find(".tmp-"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(out));
  // A side file bigger than the limit, the weights smaller.
  const std::string in = tmp_.path() + "/in";
  fs::create_directories(in);
  fs::copy_file(embedded_dir() + "/config.json", in + "/config.json");
  fs::copy_file(embedded_dir() + "/model.safetensors", in + "/model.safetensors");
  const auto q8_bytes = fs::file_size(q8_dir() + "/model.safetensors");
  tmp_.write("in/vocab.json", std::string(q8_bytes + (1 << 20), 'x'));
  err = quantize_with_file_limit(in, out, q8_bytes + (1 << 19));
  EXPECT_NE(err.find(out + "/vocab.json: write failed: File too large"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(out));
  for (const auto& e : fs::directory_iterator(tmp_.path())) EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
  // Without the limit the same input quantizes, its side file copied whole.
  err = quantize_with_file_limit(in, out, RLIM_INFINITY);
  EXPECT_EQ(err, "");
  EXPECT_EQ(fs::file_size(out + "/vocab.json"), q8_bytes + (1 << 20));
}

// An output name of up to 255 bytes is legal; the temporary ".NAME.tmp-PID" beside it must fit too,
// cut at a character boundary (here byte 229 of the name is inside a 2-byte "é"), and two names
// that differ only past the cut must not share it.
TEST_F(QuantizedCheckpoint, LongOutputNameQuantizes) {
  std::string name = "a";
  for (int i = 0; i < 127; ++i) name += "\xc3\xa9";  // 255 bytes
  const std::string out = tmp_.path() + "/" + name;
  const std::string tmp_name = fs::path(quantize_temp_dir(out)).filename().string();
  ASSERT_LE(tmp_name.size(), 255u);
  for (std::size_t i = 0; i + 1 < tmp_name.size(); ++i) {  // no "é" cut in half: a lead byte is followed by its tail
    if (static_cast<unsigned char>(tmp_name[i]) == 0xc3) {
      EXPECT_EQ(static_cast<unsigned char>(tmp_name[i + 1]), 0xa9) << i;
    }
  }
  std::string other = name;
  other.replace(other.size() - 2, 2, "zz");
  EXPECT_NE(quantize_temp_dir(out), quantize_temp_dir(tmp_.path() + "/" + other));
  auto r = quantize_checkpoint(embedded_dir(), QuantType::kQ4, out);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(fs::exists(out + "/model.safetensors"));
  for (const auto& e : fs::directory_iterator(tmp_.path())) EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

TEST(QuantizedFormat, StateSpacesBinInputQuantizes) {
  MAMBA_REQUIRE_SHARED(shared);
  test::TempDir tmp;
  const std::string in = shared + "/fixtures/mamba2-tiny-ssm-bf16/model";
  auto r = quantize_checkpoint(in, QuantType::kQ8, tmp.path() + "/q");
  ASSERT_TRUE(r.ok()) << r.error().message;
  auto ck = Checkpoint::open(tmp.path() + "/q");
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto w = bind_weights(*ck);
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(ck->config().format, CheckpointFormat::kStateSpaces);
  EXPECT_EQ(w->lm_head.data, w->embedding.data);
}

}  // namespace
}  // namespace mamba
