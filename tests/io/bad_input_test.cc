// Bad input never crashes: each malformed file or inconsistent checkpoint is a clear error that
// names the file / tensor / field and the expected vs actual value. Files are generated here.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "io/io_test_util.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "io/torch_pickle.h"
#include "mamba/checkpoint.h"
#include "mamba/quantize.h"
#include "mamba/weights.h"

namespace mamba {
namespace {

using test::StTensor;

const char* kTinyHFConfig = R"({"model_type": "mamba", "hidden_size": 4, "num_hidden_layers": 1, "vocab_size": 8,
  "state_size": 2, "conv_kernel": 2, "time_step_rank": 1, "tie_word_embeddings": %s})";

StTensor f32(const std::string& name, std::vector<std::int64_t> shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return StTensor{name, "F32", std::move(shape), std::string(static_cast<std::size_t>(n) * 4, '\0')};
}

// A complete tiny Mamba-1 (d 4, E 8, N 2, K 2, R 1, V 8, one layer) in HF names.
std::vector<StTensor> tiny_mamba1(const std::string& emb = "backbone.embeddings.weight") {
  const std::string p = "backbone.layers.0.";
  return {f32(emb, {8, 4}),
          f32(p + "norm.weight", {4}),
          f32(p + "mixer.in_proj.weight", {16, 4}),
          f32(p + "mixer.conv1d.weight", {8, 1, 2}),
          f32(p + "mixer.conv1d.bias", {8}),
          f32(p + "mixer.x_proj.weight", {5, 8}),
          f32(p + "mixer.dt_proj.weight", {8, 1}),
          f32(p + "mixer.dt_proj.bias", {8}),
          f32(p + "mixer.A_log", {8, 2}),
          f32(p + "mixer.D", {8}),
          f32(p + "mixer.out_proj.weight", {4, 8}),
          f32("backbone.norm_f.weight", {4})};
}

std::string config(bool tied) {
  char buf[512];
  std::snprintf(buf, sizeof buf, kTinyHFConfig, tied ? "true" : "false");
  return buf;
}

// Writes config + weights into a fresh dir, opens and binds; returns the error (or fails if none).
Error load_error(const test::TempDir& dir, const std::string& cfg, const std::string& safetensors_bytes) {
  dir.write("config.json", cfg);
  dir.write("model.safetensors", safetensors_bytes);
  auto ck = Checkpoint::open(dir.path());
  if (!ck.ok()) return ck.error();
  auto w = bind_weights(*ck);
  EXPECT_FALSE(w.ok()) << "expected an error";
  return w.ok() ? Error{} : w.error();
}

void expect_mentions(const Error& e, std::initializer_list<const char*> parts) {
  for (const char* p : parts) EXPECT_NE(e.message.find(p), std::string::npos) << "'" << p << "' not in: " << e.message;
}

TEST(BadInput, TinyModelLoadsWhenValid) {
  test::TempDir d;
  d.write("config.json", config(true));
  d.write("model.safetensors", test::make_safetensors(tiny_mamba1()));
  auto ck = Checkpoint::open(d.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto w = bind_weights(*ck);
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(w->layers[0].x_proj.shape, (Shape{5, 8}));
}

TEST(BadInput, TruncatedSafetensors) {
  const std::string good = test::make_safetensors(tiny_mamba1());
  test::TempDir d;
  Error e = load_error(d, config(true), good.substr(0, 5));
  EXPECT_EQ(e.code, ErrorCode::kFormat);
  expect_mentions(e, {"model.safetensors", "truncated"});
  // Cut inside the data buffer: the last tensors' offsets run past the end.
  test::TempDir d2;
  e = load_error(d2, config(true), good.substr(0, good.size() - 10));
  EXPECT_EQ(e.code, ErrorCode::kFormat);
  expect_mentions(e, {"model.safetensors", "out of range"});
}

TEST(BadInput, HeaderLengthPastEndOfFile) {
  std::string bytes = test::make_safetensors(tiny_mamba1());
  bytes.replace(0, 8, test::le(1u << 30, 8));
  test::TempDir d;
  Error e = load_error(d, config(true), bytes);
  EXPECT_EQ(e.code, ErrorCode::kFormat);
  expect_mentions(e, {"model.safetensors", "header length 1073741824", "past the end"});
  // Absurd length (u64 max) must not overflow.
  bytes.replace(0, 8, std::string(8, '\xff'));
  auto r = io::parse_safetensors(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), "x");
  ASSERT_FALSE(r.ok());
}

std::string raw_safetensors(const std::string& header_json, std::size_t data_bytes) {
  return test::le(header_json.size(), 8) + header_json + std::string(data_bytes, '\0');
}

Error parse_err(const std::string& bytes) {
  auto r = io::parse_safetensors(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), "m.safetensors");
  EXPECT_FALSE(r.ok());
  return r.ok() ? Error{} : r.error();
}

TEST(BadInput, OffsetsOverlappingOrOutOfRange) {
  Error e = parse_err(raw_safetensors(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                          "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})", 12));
  EXPECT_EQ(e.code, ErrorCode::kFormat);
  expect_mentions(e, {"m.safetensors", "'a'", "'b'", "overlap"});
  e = parse_err(raw_safetensors(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})", 12));
  expect_mentions(e, {"'a'", "out of range", "12 bytes"});
  e = parse_err(raw_safetensors(R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", 12));
  expect_mentions(e, {"'a'", "end before begin"});
  e = parse_err(raw_safetensors(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [18446744073709551615, 7]}})", 12));
  EXPECT_EQ(e.code, ErrorCode::kFormat);
  // Past 2^64 − 1 (a float to JSON): named with the values, not as "non-negative integers".
  e = parse_err(raw_safetensors(R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [18446744073709551600, 18446744073709551856]}})", 12));
  expect_mentions(e, {"'a'", "data_offsets [18446744073709551600,", "expected two integers in [0, 2^64)"});
}

TEST(BadInput, ATensorNamedTwiceIsAnError) {
  // JSON parsers keep the last of repeated keys silently: which tensor would load is ambiguous.
  Error e = parse_err(raw_safetensors(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                          "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8));
  EXPECT_EQ(e.code, ErrorCode::kFormat);
  expect_mentions(e, {"m.safetensors", "'a' twice"});
  // The same name inside two different tensors' records is no repeat.
  auto ok = raw_safetensors(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8);
  EXPECT_TRUE(io::parse_safetensors(reinterpret_cast<const std::uint8_t*>(ok.data()), ok.size(), "m.safetensors").ok());
}

TEST(BadInput, AHeaderOfManyTensorsParsesInLinearTime) {
  // 100 000 empty tensors (a 6.6 MB header): the repeat check through a parser callback made nlohmann
  // walk the whole header object at each record's end (60 000 took 24 s, 300 000 ~20 minutes).
  std::string header = "{";
  for (int i = 0; i < 100000; ++i) header += fmt::format(R"({}"t{}": {{"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}})", i ? "," : "", i);
  header += ", \"t7\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [0, 0]}}";
  const std::string bytes = raw_safetensors(header, 0);
  const auto t0 = std::chrono::steady_clock::now();
  Error e = parse_err(bytes);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  expect_mentions(e, {"'t7' twice"});
  EXPECT_LT(s, 5.0) << "a header of 100 000 tensors took " << s << " s";
}

TEST(BadInput, UnknownDtype) {
  Error e = parse_err(raw_safetensors(R"({"a": {"dtype": "F8_E4M3X", "shape": [2], "data_offsets": [0, 2]}})", 2));
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  expect_mentions(e, {"m.safetensors", "'a'", "F8_E4M3X"});
}

TEST(BadInput, ShapeTimesDtypeDiffersFromByteSpan) {
  Error e = parse_err(raw_safetensors(R"({"w": {"dtype": "BF16", "shape": [3, 4], "data_offsets": [0, 48]}})", 48));
  EXPECT_EQ(e.code, ErrorCode::kFormat);
  expect_mentions(e, {"'w'", "[3,4]", "24 bytes", "48 bytes"});
  // Element count overflow is caught, not wrapped.
  e = parse_err(raw_safetensors(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", 0));
  expect_mentions(e, {"'w'", "overflow"});
  e = parse_err(raw_safetensors(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 0]}})", 0));
  expect_mentions(e, {"'w'", "negative"});
  e = parse_err(raw_safetensors(R"([1, 2])", 0));
  expect_mentions(e, {"m.safetensors", "not a JSON object"});
}

TEST(BadInput, MissingTensor) {
  auto ts = tiny_mamba1();
  ts.erase(ts.begin() + 5);  // x_proj
  test::TempDir d;
  Error e = load_error(d, config(true), test::make_safetensors(ts));
  EXPECT_EQ(e.code, ErrorCode::kNotFound);
  expect_mentions(e, {d.path().c_str(), "backbone.layers.0.mixer.x_proj.weight", "[5, 8]", "missing"});
}

TEST(BadInput, TensorsUnderAnotherPrefixAreNamedAsSuch) {
  // Saved from a class whose tensors are not under "backbone." (HF's MambaModel: no prefix; or
  // "model."): the missing tensor's error names the stored one, so a prefix mismatch is not
  // mistaken for a truncated file.
  for (const std::string prefix : {"model.", ""}) {
    auto ts = tiny_mamba1();
    for (auto& t : ts) t.name = prefix + t.name.substr(std::string("backbone.").size());
    test::TempDir d;
    Error e = load_error(d, config(true), test::make_safetensors(ts));
    EXPECT_EQ(e.code, ErrorCode::kNotFound);
    expect_mentions(e, {"backbone.embeddings.weight", "missing", ("the file holds '" + prefix + "embeddings.weight'").c_str(),
                        prefix.empty() ? "under no prefix" : "under 'model.'"});
  }
}

TEST(BadInput, TensorsOfLayersBeyondNLayerAreAnError) {
  // A 2-layer checkpoint whose config says 1 layer: layer 1 would be ignored silently.
  auto ts = tiny_mamba1();
  for (const auto& t : tiny_mamba1()) {
    if (t.name.rfind("backbone.layers.0.", 0) != 0) continue;
    ts.push_back(t);
    ts.back().name.replace(0, std::string("backbone.layers.0.").size(), "backbone.layers.1.");
  }
  test::TempDir d;
  Error e = load_error(d, config(true), test::make_safetensors(ts));
  EXPECT_EQ(e.code, ErrorCode::kShape);
  expect_mentions(e, {"model.safetensors", "'backbone.layers.1.norm.weight'", "layer 1", "num_hidden_layers = 1"});
}

TEST(BadInput, QuantizingANothingQuantizableModelIsAnErrorAndWritesNothing) {
  // Every projection / embedding of the tiny model has K < 32: a "q4" copy would be the input relabelled.
  test::TempDir d;
  d.write("config.json", config(true));
  d.write("model.safetensors", test::make_safetensors(tiny_mamba1()));
  const std::string out = d.path() + "/q4";
  auto r = quantize_checkpoint(d.path(), QuantType::kQ4, out);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  expect_mentions(r.error(), {"nothing to quantize", "multiple of 32", "backbone.embeddings.weight"});
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_FALSE(std::filesystem::exists(quantize_temp_dir(out)));
}

// A config.json that is a FIFO is refused at once (it blocked the open: `inspect` hung), and a
// symbolic-link loop is named as one (it read "no such file", or "model not found" with the HF cache
// hint for a directory loop).
TEST(BadInput, FifoAndLinkLoopsAreNamedNotHungOrNotFound) {
  test::TempDir d;
  const std::string fifo_dir = d.path() + "/fifo";
  std::filesystem::create_directories(fifo_dir);
  ASSERT_EQ(::mkfifo((fifo_dir + "/config.json").c_str(), 0600), 0);
  auto fifo = Checkpoint::open(fifo_dir);
  ASSERT_FALSE(fifo.ok());
  expect_mentions(fifo.error(), {"config.json", "is not a regular file"});

  const std::string loop_dir = d.path() + "/loop";
  std::filesystem::create_directories(loop_dir);
  std::filesystem::create_symlink("config.json", loop_dir + "/config.json");
  auto loop = Checkpoint::open(loop_dir);
  ASSERT_FALSE(loop.ok());
  expect_mentions(loop.error(), {"config.json", "Too many levels of symbolic links"});

  d.write("weights-loop/config.json", config(true));
  std::filesystem::create_symlink("model.safetensors", d.path() + "/weights-loop/model.safetensors");
  auto weights = Checkpoint::open(d.path() + "/weights-loop");
  ASSERT_FALSE(weights.ok());
  expect_mentions(weights.error(), {"model.safetensors", "Too many levels of symbolic links"});

  std::filesystem::create_directory_symlink(d.path() + "/dirloop", d.path() + "/dirloop");
  auto dir = resolve_model_path(d.path() + "/dirloop");
  ASSERT_FALSE(dir.ok());
  expect_mentions(dir.error(), {"dirloop", "Too many levels of symbolic links"});
  EXPECT_EQ(dir.error().message.find("not found"), std::string::npos) << dir.error().message;
}

// Any mapped file (a shard, pytorch_model.bin) that is a FIFO is refused at once (a FIFO shard
// blocked the open: loading hung), and a dangling link in its place (an interrupted Hugging Face
// download) is named as one.
TEST(BadInput, AFifoOrDanglingLinkInPlaceOfAMappedFileIsNamed) {
  test::TempDir d;
  const std::string fifo = d.path() + "/model-00002-of-00002.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto f = io::MappedFile::open(fifo);
  ASSERT_FALSE(f.ok());
  expect_mentions(f.error(), {fifo.c_str(), "not a regular file"});
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  const std::string link = d.path() + "/model-00001-of-00002.safetensors";
  std::filesystem::create_symlink("../../blobs/0123abcd", link);
  auto dangling = io::MappedFile::open(link);
  ASSERT_FALSE(dangling.ok());
  EXPECT_EQ(dangling.error().code, ErrorCode::kNotFound);
  expect_mentions(dangling.error(), {link.c_str(), "a symbolic link to ../../blobs/0123abcd, which does not exist", "interrupted download"});
}

TEST(BadInput, WrongShapeNamesExpectedAndActual) {
  auto ts = tiny_mamba1();
  ts[2] = f32("backbone.layers.0.mixer.in_proj.weight", {12, 4});
  test::TempDir d;
  Error e = load_error(d, config(true), test::make_safetensors(ts));
  EXPECT_EQ(e.code, ErrorCode::kShape);
  expect_mentions(e, {"model.safetensors", "backbone.layers.0.mixer.in_proj.weight", "expected shape [16, 4]", "got [12, 4]"});
  // The config fields the expected shape follows, by the file's names (a hand-edited state_size
  // or hidden_size shows up as a tensor of the wrong shape first).
  expect_mentions(e, {"the expected shape follows config.json: hidden_size 4, expand 2 (d_inner 8), state_size"});
}

TEST(BadInput, UnsupportedWeightDtype) {
  auto ts = tiny_mamba1();
  ts[1] = StTensor{"backbone.layers.0.norm.weight", "I32", {4}, std::string(16, '\0')};
  test::TempDir d;
  Error e = load_error(d, config(true), test::make_safetensors(ts));
  EXPECT_EQ(e.code, ErrorCode::kShape);
  expect_mentions(e, {"backbone.layers.0.norm.weight", "I32", "F32, BF16 or F16"});
}

TEST(BadInput, UntiedWithoutLmHead) {
  test::TempDir d;
  Error e = load_error(d, config(false), test::make_safetensors(tiny_mamba1()));
  EXPECT_EQ(e.code, ErrorCode::kNotFound);
  expect_mentions(e, {"lm_head.weight", "untied"});
  // With the head present it loads, and the head is not the embedding.
  auto ts = tiny_mamba1();
  ts.push_back(f32("lm_head.weight", {8, 4}));
  test::TempDir d2;
  d2.write("config.json", config(false));
  d2.write("model.safetensors", test::make_safetensors(ts));
  auto ck = Checkpoint::open(d2.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto w = bind_weights(*ck);
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_NE(w->lm_head.data, w->embedding.data);
}

TEST(BadInput, BiasPresenceMustMatchConfig) {
  auto ts = tiny_mamba1();
  ts.erase(ts.begin() + 4);  // conv1d.bias, but use_conv_bias defaults to true
  test::TempDir d;
  Error e = load_error(d, config(true), test::make_safetensors(ts));
  expect_mentions(e, {"conv1d.bias", "use_conv_bias = true"});
}

TEST(BadInput, LayerNormIsRefusedClearly) {
  test::TempDir d;
  Error e = load_error(d, R"({"d_model": 4, "n_layer": 1, "vocab_size": 8, "rms_norm": false,
                             "ssm_cfg": {"d_state": 2, "d_conv": 2, "dt_rank": 1}})",
                       test::make_safetensors(tiny_mamba1("backbone.embedding.weight")));
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  expect_mentions(e, {"rms_norm = false", "LayerNorm"});
}

TEST(BadInput, ConfigMissingModelSize) {
  test::TempDir d;
  Error e = load_error(d, R"({"model_type": "mamba", "num_hidden_layers": 1, "vocab_size": 8})", test::make_safetensors(tiny_mamba1()));
  EXPECT_EQ(e.code, ErrorCode::kNotFound);
  expect_mentions(e, {"config.json", "hidden_size"});
  test::TempDir d2;
  e = load_error(d2, R"({"n_layer": 1, "vocab_size": 8})", test::make_safetensors(tiny_mamba1()));
  expect_mentions(e, {"config.json", "d_model"});
}

TEST(BadInput, MissingFiles) {
  test::TempDir d;
  auto ck = Checkpoint::open(d.path());
  ASSERT_FALSE(ck.ok());
  expect_mentions(ck.error(), {"config.json"});
  d.write("config.json", config(true));
  ck = Checkpoint::open(d.path());
  ASSERT_FALSE(ck.ok());
  expect_mentions(ck.error(), {"no weights found", "model.safetensors"});
  // A shard listed in the index that does not exist.
  d.write("model.safetensors.index.json", R"({"weight_map": {"backbone.norm_f.weight": "model-00001-of-00002.safetensors"}})");
  ck = Checkpoint::open(d.path());
  ASSERT_FALSE(ck.ok());
  expect_mentions(ck.error(), {"model-00001-of-00002.safetensors"});
  d.write("model.safetensors.index.json", R"({"weight_map": {"x": "../../etc/passwd"}})");
  ck = Checkpoint::open(d.path());
  ASSERT_FALSE(ck.ok());
  expect_mentions(ck.error(), {"not a plain file name"});
}

// ---- pickle --------------------------------------------------------------------------------------

using namespace std::string_literals;

// BINUNICODE opcode with its string.
std::string U(const std::string& s) {
  std::string op = "X";  // (not "X" + …: GCC 12 warns -Wrestrict on that insert, a false positive)
  return op + test::le(s.size(), 4) + s;
}

// {"w": tensor of `numel` elements over FloatStorage "0" of `storage_numel` elements}.
std::string one_tensor_pickle(int numel, int storage_numel, const char* storage_type = "FloatStorage") {
  return "\x80\x02}("s + U("w") + "ctorch._utils\n_rebuild_tensor_v2\n" + "((" + U("storage") + "ctorch\n" + storage_type + "\n" + U("0") +
         U("cpu") + "K" + std::string(1, static_cast<char>(storage_numel)) + "tQK\x00"s + "K" + std::string(1, static_cast<char>(numel)) +
         "\x85K\x01\x85\x89)tRu.";
}

Error pickle_err(const std::string& pkl) {
  auto r = io::parse_torch_pickle(reinterpret_cast<const std::uint8_t*>(pkl.data()), pkl.size(), "data.pkl");
  EXPECT_FALSE(r.ok());
  return r.ok() ? Error{} : r.error();
}

Error torch_bin_error(const std::string& pkl) {
  test::TempDir d;
  d.write("config.json", R"({"d_model": 4, "n_layer": 1, "vocab_size": 8})");
  d.write("pytorch_model.bin", test::make_zip({{"archive/data.pkl", pkl}, {"archive/version", "3\n"}}));
  auto ck = Checkpoint::open(d.path());
  EXPECT_FALSE(ck.ok());
  return ck.ok() ? Error{} : ck.error();
}

TEST(BadInput, MaliciousPickleGlobalIsRefusedWithoutRunningIt) {
  // os.system("touch <file>") as pickle protocol 2 would write it.
  test::TempDir marker;
  const std::string target = marker.path() + "/pwned";
  const std::string cmd = "touch " + target;
  std::string pkl = "\x80\x02"s + "cposix\nsystem\nq\x00"s + U(cmd) + "\x85R.";
  Error e = torch_bin_error(pkl);
  EXPECT_EQ(e.code, ErrorCode::kFormat);
  expect_mentions(e, {"pytorch_model.bin", "forbidden pickle global 'posix.system'"});
  EXPECT_FALSE(std::filesystem::exists(target));
  // STACK_GLOBAL form too (protocol 4).
  pkl = "\x80\x04\x8c\x08"s + "builtins" + "\x8c\x04" + "eval" + "\x93" + ".";
  e = pickle_err(pkl);
  expect_mentions(e, {"builtins.eval"});
}

TEST(BadInput, UnknownPickleOpcodeIsNamed) {
  Error e = torch_bin_error("\x80\x02}q\x00("s + U("a") + "\xf0" + "u.");
  EXPECT_EQ(e.code, ErrorCode::kFormat);
  expect_mentions(e, {"pytorch_model.bin", "opcode 0xf0"});
  e = pickle_err("\x80\x02"s + "(i__main__\nX\n.");  // INST
  expect_mentions(e, {"opcode 0x69", "INST"});
}

TEST(BadInput, APickleStringThatIsNotUtf8IsADamagedFile) {
  // A tensor name whose bytes were overwritten (a fresh user's damaged copy): refused as Python's
  // unpickler refuses it, not quoted raw into a "named under another prefix" hint.
  std::string pkl = one_tensor_pickle(4, 4);
  pkl.replace(pkl.find(U("w")), U("w").size(), U("\x93\x94w"));
  Error e = torch_bin_error(pkl);
  EXPECT_EQ(e.code, ErrorCode::kFormat);
  expect_mentions(e, {"pytorch_model.bin", "a string of 3 bytes is not valid UTF-8 (byte 0x93 at its offset 0): the file is damaged"});
  // Overlong and past-U+10FFFF forms too; valid multi-byte names and encoded surrogates (Python's
  // surrogatepass) are taken.
  for (const std::string& bad : {"\xC0\xAF"s, "\xE0\x80\xAF"s, "\xF4\x90\x80\x80"s, "\xE2\x82"s})
    expect_mentions(pickle_err("\x80\x02"s + U(bad) + "."), {"is not valid UTF-8"});
  for (const std::string& ok : {"caf\xC3\xA9"s, "\xE2\x82\xAC"s, "\xF0\x9F\x98\x80"s, "\xED\xA0\x80"s}) {
    const std::string one = "\x80\x02"s + U(ok) + ".";
    auto r = io::parse_torch_pickle(reinterpret_cast<const std::uint8_t*>(one.data()), one.size(), "data.pkl");
    // (A string alone is no state dict: the error, if any, must not be about UTF-8.)
    if (!r.ok()) {
      EXPECT_EQ(r.error().message.find("UTF-8"), std::string::npos) << r.error().message;
    }
  }
}

TEST(BadInput, MalformedPickles) {
  expect_mentions(pickle_err("\x80\x02}"s), {"truncated", "STOP"});
  expect_mentions(pickle_err("\x80\x02X\xff\xff\xff\x7f"s), {"truncated"});
  expect_mentions(pickle_err("\x80\x02t."s), {"MARK"});
  expect_mentions(pickle_err("\x80\x02R."s), {"underflow"});
  expect_mentions(pickle_err("\x80\x02h\x05."s), {"memo key 5"});
  expect_mentions(pickle_err("\x80\x02}q\x00h\x00h\x00s."s), {"contains itself"});
  expect_mentions(pickle_err(std::string("\x80\x02K\x01.")), {"holds a int", "state dict"});
  std::string deep = "\x80\x02K\x00"s;
  for (int i = 0; i < 100000; ++i) deep += "\x85";
  expect_mentions(pickle_err(deep + "."), {"nested deeper"});
  // A tensor whose elements exceed its storage.
  expect_mentions(pickle_err(one_tensor_pickle(8, 4)), {"exceed storage '0' of 4 elements"});
  // An unsupported storage type.
  expect_mentions(pickle_err(one_tensor_pickle(4, 4, "LongStorage")), {"torch.LongStorage"});
}

TEST(BadInput, NonContiguousPickledTensorIsRefusedByName) {
  // torch.save keeps a transposed view as (size (2, 3), stride (1, 2)): refused, naming the state
  // dict key (it was named by its pickle byte offset only).
  const std::string pkl = "\x80\x02}("s + U("layer.x_proj.weight") + "ctorch._utils\n_rebuild_tensor_v2\n" + "((" + U("storage") +
                          "ctorch\nFloatStorage\n" + U("0") + U("cpu") + "K\x06tQK\x00"s + "K\x02K\x03\x86" + "K\x01K\x02\x86" +
                          "\x89)tRu.";
  const Error e = pickle_err(pkl);
  EXPECT_EQ(e.code, ErrorCode::kUnsupported);
  expect_mentions(e, {"tensor 'layer.x_proj.weight'", "non-contiguous view (size (2, 3), stride (1, 2))", ".contiguous()"});
  // A strided view reaching past its storage is still a bounds error (not read first).
  const std::string past = "\x80\x02}("s + U("w") + "ctorch._utils\n_rebuild_tensor_v2\n" + "((" + U("storage") +
                           "ctorch\nFloatStorage\n" + U("0") + U("cpu") + "K\x04tQK\x00"s + "K\x02K\x03\x86" + "K\x01K\x02\x86" +
                           "\x89)tRu.";
  expect_mentions(pickle_err(past), {"exceed storage '0' of 4 elements"});
}

// Tensors that are views into one storage (torch.save of a state dict whose tensors share memory,
// e.g. a fused weight split into parts): each reads from its own storage offset. Every fixture
// checkpoint has offset 0, so a loader ignoring the offset passed every other test.
TEST(TorchBin, TensorsSharingAStorageReadTheirOwnOffsets) {
  auto tensor = [](char offset) {
    return "ctorch._utils\n_rebuild_tensor_v2\n"s + "((" + U("storage") + "ctorch\nFloatStorage\n" + U("0") + U("cpu") + "K\x05tQK" +
           std::string(1, offset) + "K\x02\x85K\x01\x85\x89)tR";
  };
  const std::string pkl = "\x80\x02}("s + U("a") + tensor('\x00') + U("b") + tensor('\x03') + "u.";
  const float storage[5] = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f};
  test::TempDir d;
  d.write("config.json", R"({"d_model": 4, "n_layer": 1, "vocab_size": 8})");
  d.write("pytorch_model.bin", test::make_zip({{"archive/data.pkl", pkl},
                                                {"archive/data/0", std::string(reinterpret_cast<const char*>(storage), sizeof storage)}}));
  auto ck = Checkpoint::open(d.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  const TensorEntry* a = ck->find("a");
  const TensorEntry* b = ck->find("b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(static_cast<const float*>(a->view.data)[0], 1.0f);
  EXPECT_EQ(static_cast<const float*>(a->view.data)[1], 2.0f);
  EXPECT_EQ(static_cast<const float*>(b->view.data)[0], 4.0f);
  EXPECT_EQ(static_cast<const float*>(b->view.data)[1], 5.0f);
}

TEST(BadInput, PickleStorageMissingOrTooSmall) {
  // Valid pickle, but the storage entry is absent / smaller than declared.
  const std::string pkl = one_tensor_pickle(4, 4);
  Error e = torch_bin_error(pkl);
  expect_mentions(e, {"tensor 'w'", "archive/data/0", "missing"});
  test::TempDir d;
  d.write("config.json", R"({"d_model": 4, "n_layer": 1, "vocab_size": 8})");
  d.write("pytorch_model.bin", test::make_zip({{"archive/data.pkl", pkl}, {"archive/data/0", std::string(8, '\0')}}));
  auto ck = Checkpoint::open(d.path());
  ASSERT_FALSE(ck.ok());
  expect_mentions(ck.error(), {"tensor 'w'", "16 bytes", "holds 8 bytes"});
  // Valid: loads and the tensor is found.
  test::TempDir ok;
  ok.write("config.json", R"({"d_model": 4, "n_layer": 1, "vocab_size": 8})");
  ok.write("pytorch_model.bin", test::make_zip({{"archive/data.pkl", pkl}, {"archive/data/0", std::string(16, '\0')}}));
  auto good = Checkpoint::open(ok.path());
  ASSERT_TRUE(good.ok()) << good.error().message;
  ASSERT_NE(good->find("w"), nullptr);
  EXPECT_EQ(good->find("w")->view.shape, (Shape{4}));
}

TEST(TorchZip, Zip64ArchivesShardsAndByteOrder) {
  const std::string cfg = R"({"d_model": 4, "n_layer": 1, "vocab_size": 8})";
  std::string data(16, '\0');
  for (int i = 0; i < 4; ++i) data[static_cast<std::size_t>(4 * i + 3)] = static_cast<char>(0x3f + i);  // distinct floats
  // zip64 records and extra fields (what > 4 GiB archives use).
  test::TempDir z;
  z.write("config.json", cfg);
  z.write("pytorch_model.bin", test::make_zip({{"m/data.pkl", one_tensor_pickle(4, 4)}, {"m/byteorder", "little"}, {"m/data/0", data}}, true));
  auto ck = Checkpoint::open(z.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  ASSERT_NE(ck->find("w"), nullptr);
  EXPECT_EQ(test::view_bytes(ck->find("w")->view), data);
  // Big-endian storages are refused by name.
  test::TempDir be;
  be.write("config.json", cfg);
  be.write("pytorch_model.bin", test::make_zip({{"m/data.pkl", one_tensor_pickle(4, 4)}, {"m/byteorder", "big"}, {"m/data/0", data}}));
  ck = Checkpoint::open(be.path());
  ASSERT_FALSE(ck.ok());
  expect_mentions(ck.error(), {"byte order \"big\""});
  // Sharded pytorch_model.bin through pytorch_model.bin.index.json.
  auto rename = [](std::string pkl, const char* to) {
    pkl.replace(pkl.find("X\x01\x00\x00\x00w"s), 6, U(to));
    return pkl;
  };
  test::TempDir sh;
  sh.write("config.json", cfg);
  sh.write("pytorch_model-00001-of-00002.bin", test::make_zip({{"a/data.pkl", rename(one_tensor_pickle(4, 4), "x")}, {"a/data/0", data}}));
  sh.write("pytorch_model-00002-of-00002.bin", test::make_zip({{"b/data.pkl", rename(one_tensor_pickle(2, 4), "y")}, {"b/data/0", data}}));
  sh.write("pytorch_model.bin.index.json", R"({"weight_map": {"x": "pytorch_model-00001-of-00002.bin", "y": "pytorch_model-00002-of-00002.bin"}})");
  ck = Checkpoint::open(sh.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  ASSERT_NE(ck->find("x"), nullptr);
  ASSERT_NE(ck->find("y"), nullptr);
  EXPECT_EQ(ck->find("y")->view.shape, (Shape{2}));
  EXPECT_EQ(test::view_bytes(ck->find("y")->view), data.substr(0, 8));
  EXPECT_NE(ck->find("y")->file.find("00002-of-00002"), std::string::npos);
}

TEST(BadInput, TruncatedOrNonZipTorchFile) {
  test::TempDir d;
  d.write("config.json", R"({"d_model": 4, "n_layer": 1, "vocab_size": 8})");
  std::string zip = test::make_zip({{"archive/data.pkl", "\x80\x02}."s}, {"archive/data/0", std::string(64, 'x')}});
  d.write("pytorch_model.bin", zip.substr(0, zip.size() / 2));
  auto ck = Checkpoint::open(d.path());
  ASSERT_FALSE(ck.ok());
  expect_mentions(ck.error(), {"pytorch_model.bin", "zip"});
  d.write("pytorch_model.bin", "not a zip at all, just text that is long enough to search");
  ck = Checkpoint::open(d.path());
  ASSERT_FALSE(ck.ok());
  expect_mentions(ck.error(), {"end-of-central-directory"});
}

}  // namespace
}  // namespace mamba

namespace mamba {
namespace {

// State-spaces Mamba-2 with d_ssm < expand·d_model: the rest of in_proj is a gated-MLP prefix of
// width d_mlp = (rows − 2E − 2GN − H) / 2, and out_proj reads E + d_mlp channels.
std::vector<StTensor> tiny_mamba2_with_mlp(std::int64_t in_proj_rows) {
  const std::string p = "backbone.layers.0.";
  return {f32("backbone.embedding.weight", {16, 8}),
          f32(p + "norm.weight", {8}),
          f32(p + "mixer.in_proj.weight", {in_proj_rows, 8}),
          f32(p + "mixer.conv1d.weight", {12, 1, 2}),
          f32(p + "mixer.conv1d.bias", {12}),
          f32(p + "mixer.dt_bias", {2}),
          f32(p + "mixer.A_log", {2}),
          f32(p + "mixer.D", {2}),
          f32(p + "mixer.norm.weight", {8}),
          f32(p + "mixer.out_proj.weight", {8, 16}),
          f32("backbone.norm_f.weight", {8})};
}

const char* kMamba2MlpConfig = R"({"d_model": 8, "n_layer": 1, "vocab_size": 16,
  "ssm_cfg": {"layer": "Mamba2", "d_state": 2, "d_conv": 2, "headdim": 4, "ngroups": 1, "d_ssm": 8}})";

TEST(Mamba2Mlp, DMlpComesFromInProjRows) {
  test::TempDir d;
  d.write("config.json", kMamba2MlpConfig);
  d.write("model.safetensors", test::make_safetensors(tiny_mamba2_with_mlp(2 * 8 + 2 * 8 + 2 * 2 + 2)));
  auto ck = Checkpoint::open(d.path());
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  EXPECT_EQ(ck->config().d_inner, 8);
  EXPECT_EQ(ck->config().n_heads, 2);
  auto w = bind_weights(*ck);
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(ck->config().d_mlp, 8);
  EXPECT_EQ(ck->config().in_proj_rows(), 38);
  EXPECT_EQ(w->layers[0].out_proj.shape, (Shape{8, 16}));
}

// A state-spaces config fixes d_mlp (expand·d_model − d_ssm), as mamba_ssm builds the layer from
// it: tensors of another d_mlp are a checkpoint mamba_ssm would not load, named as such.
TEST(Mamba2Mlp, StateSpacesConfigAndTensorsMustAgreeOnDMlp) {
  test::TempDir d;
  std::vector<StTensor> t = tiny_mamba2_with_mlp(2 * 8 + 2 * 2 + 2);  // no MLP prefix: d_mlp 0
  for (StTensor& x : t)
    if (x.name.find("out_proj") != std::string::npos) x = f32(x.name, {8, 8});
  Error e = load_error(d, kMamba2MlpConfig, test::make_safetensors(t));
  EXPECT_EQ(e.code, ErrorCode::kShape);
  expect_mentions(e, {"backbone.layers.0.mixer.in_proj.weight", "implies d_mlp 0",
                      "expand·d_model − ssm_cfg.d_ssm = 16 − 8 = 8 (expand 2, d_model 8)"});
}

TEST(Mamba2Mlp, InProjRowsThatFitNoDMlpAreNamed) {
  test::TempDir d;
  Error e = load_error(d, kMamba2MlpConfig, test::make_safetensors(tiny_mamba2_with_mlp(37)));
  EXPECT_EQ(e.code, ErrorCode::kShape);
  expect_mentions(e, {"backbone.layers.0.mixer.in_proj.weight", "2·d_mlp + 22", "got [37, 8]"});
}

}  // namespace
}  // namespace mamba
