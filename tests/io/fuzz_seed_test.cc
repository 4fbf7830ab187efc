// The checked-in fuzz seeds are valid inputs (so fuzzing starts from accepted paths), and the
// pickle seed exercises what torch.save writes beyond the fixtures: OrderedDict REDUCE, the
// `_metadata` BUILD, memoised _rebuild_tensor_v2, shared and BFloat16 storages.
#include <filesystem>
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "io/safetensors.h"
#include "io/torch_pickle.h"
#include "io/zip_reader.h"
#include "mamba/config.h"

namespace mamba {
namespace {

namespace fs = std::filesystem;
const fs::path kCorpus = fs::path(MAMBA_TEST_SOURCE_DIR) / "fuzz" / "corpus";

const std::uint8_t* u8(const std::string& s) { return reinterpret_cast<const std::uint8_t*>(s.data()); }

TEST(FuzzSeeds, PickleSeedIsATorchStateDict) {
  const std::string pkl = test::read_file((kCorpus / "fuzz_pickle" / "state_dict.pkl").string());
  auto r = io::parse_torch_pickle(u8(pkl), pkl.size(), "state_dict.pkl");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ((*r)[0].name, "backbone.embedding.weight");
  EXPECT_EQ((*r)[0].shape, (Shape{2, 4}));
  EXPECT_EQ((*r)[1].name, "lm_head.weight");
  EXPECT_EQ((*r)[1].storage_key, (*r)[0].storage_key);
  EXPECT_EQ((*r)[2].dtype, DType::kBF16);
  EXPECT_EQ((*r)[2].storage_numel, 4);

  const std::string zip = test::read_file((kCorpus / "fuzz_pickle" / "archive.bin").string());
  auto z = io::parse_zip_directory(u8(zip), zip.size(), "archive.bin");
  ASSERT_TRUE(z.ok()) << z.error().message;
  ASSERT_EQ(z->size(), 3u);
  EXPECT_EQ((*z)[0].name, "archive/data.pkl");
  EXPECT_EQ(zip.substr((*z)[0].data_offset, (*z)[0].size), pkl);
}

TEST(FuzzSeeds, ConfigAndSafetensorsSeedsAreAccepted) {
  for (const auto& e : fs::directory_iterator(kCorpus / "fuzz_config")) {
    SCOPED_TRACE(e.path().string());
    auto r = ModelConfig::from_json_text(test::read_file(e.path().string()), e.path().string());
    EXPECT_TRUE(r.ok()) << r.error().message;
  }
  for (const auto& e : fs::directory_iterator(kCorpus / "fuzz_safetensors")) {
    SCOPED_TRACE(e.path().string());
    const std::string b = test::read_file(e.path().string());
    auto r = io::parse_safetensors(u8(b), b.size(), e.path().string());
    EXPECT_TRUE(r.ok()) << r.error().message;
  }
}

}  // namespace
}  // namespace mamba
