// Weights stay mmapped in their stored dtype: loading adds almost nothing to resident memory, and
// touching every weight adds about the file size (never a wholesale f32 conversion, which would be
// 2× the file for bf16 weights). Every bound view lies inside a read-only mapping of the file.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "io/io_test_util.h"
#include "mamba/checkpoint.h"
#include "mamba/weights.h"

namespace mamba {
namespace {

// Resident set size of this process in bytes (/proc/self/status VmRSS).
std::int64_t vm_rss_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      std::istringstream ss(line.substr(6));
      std::int64_t kb = 0;
      ss >> kb;
      return kb * 1024;
    }
  }
  return -1;
}

// The pathname of the mapping containing `p` (from /proc/self/maps), or "" if none / anonymous.
std::string mapping_of(const void* p) {
  std::ifstream f("/proc/self/maps");
  std::string line;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  while (std::getline(f, line)) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream ss(line);
    ss >> std::hex >> lo >> dash >> hi;
    if (a >= lo && a < hi) {
      std::string perms, off, dev, inode, path;
      ss >> perms >> off >> dev >> inode;
      std::getline(ss, path);
      auto s = path.find_first_not_of(' ');
      return perms.substr(0, 2) + " " + (s == std::string::npos ? "" : path.substr(s));
    }
  }
  return "";
}

TEST(ResidentMemory, WeightsAreMappedNotCopied) {
  MAMBA_REQUIRE_SHARED(shared);
  const std::string dir = shared + "/models/mamba2-books-16m";
  const std::string file = dir + "/model.safetensors";
  const auto file_size = static_cast<std::int64_t>(std::filesystem::file_size(file));
  ASSERT_GT(file_size, 10 << 20);

  const std::int64_t rss0 = vm_rss_bytes();
  ASSERT_GT(rss0, 0);
  auto ck = Checkpoint::open(dir);
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  auto w = bind_weights(*ck);
  ASSERT_TRUE(w.ok()) << w.error().message;
  const std::int64_t rss1 = vm_rss_bytes();
  EXPECT_LT(rss1 - rss0, file_size / 4) << "loading alone made " << (rss1 - rss0) << " bytes resident";

  // Every bound view is inside a read-only mapping of model.safetensors, in the stored dtype.
  for (const auto& [label, v] : test::all_views(*w)) {
    if (v.empty()) continue;
    SCOPED_TRACE(label);
    EXPECT_EQ(v.dtype, DType::kBF16);
    const std::string m = mapping_of(v.data);
    EXPECT_EQ(m.rfind("r-", 0), 0u) << m;
    EXPECT_NE(m.find("model.safetensors"), std::string::npos) << m;
  }

  // Touch every page of every tensor: resident memory grows by about the file size, not 2×.
  std::uint64_t sum = 0;
  for (const auto& t : ck->tensors()) {
    const auto* b = static_cast<const std::uint8_t*>(t.view.data);
    for (std::size_t i = 0; i < t.view.nbytes(); i += 4096) sum += b[i];
  }
  volatile std::uint64_t keep = sum;
  (void)keep;
  const std::int64_t rss2 = vm_rss_bytes();
  // (A copy would make it ≥ 2×; the slack covers allocator and sanitizer overhead: under ASan the
  // growth reached 1.34× once.)
  EXPECT_LT(rss2 - rss0, file_size + file_size / 2 + (4 << 20)) << "file " << file_size << " bytes, resident growth " << (rss2 - rss0);
  EXPECT_GT(rss2 - rss0, file_size / 2) << "pages touched but not resident? growth " << (rss2 - rss0);
}

TEST(ResidentMemory, ReleasedPagesLeaveTheResidentSetAndReadBackUnchanged) {
  // Checkpoint::release_pages (used after repacking weights): mapped pages leave the resident set
  // and read back the same bytes; memory outside the checkpoint's mappings is left alone.
  MAMBA_REQUIRE_SHARED(shared);
  auto ck = Checkpoint::open(shared + "/models/mamba2-books-16m");
  ASSERT_TRUE(ck.ok()) << ck.error().message;
  const TensorEntry* big = nullptr;
  for (const auto& t : ck->tensors())
    if (big == nullptr || t.view.nbytes() > big->view.nbytes()) big = &t;
  ASSERT_NE(big, nullptr);
  ASSERT_GT(big->view.nbytes(), std::size_t{8} << 20) << big->name;
  const auto* b = static_cast<const std::uint8_t*>(big->view.data);
  const std::size_t n = big->view.nbytes();
  std::uint64_t before = 0;
  for (std::size_t i = 0; i < n; i += 512) before = before * 31 + b[i];  // touches every page
  const std::int64_t rss1 = vm_rss_bytes();
  ck->release_pages(b, n);
  const std::int64_t rss2 = vm_rss_bytes();
  EXPECT_GT(rss1 - rss2, static_cast<std::int64_t>(n / 2)) << big->name << ": " << n << " bytes released, resident " << rss1 << " → " << rss2;
  std::uint64_t after = 0;
  for (std::size_t i = 0; i < n; i += 512) after = after * 31 + b[i];
  EXPECT_EQ(before, after) << "the released bytes read back differently";

  std::vector<std::uint8_t> heap(std::size_t{4} << 20, 0x5A);  // not a mapping of the checkpoint
  ck->release_pages(heap.data(), heap.size());
  for (std::size_t i = 0; i < heap.size(); i += 4096) ASSERT_EQ(heap[i], 0x5A) << "heap byte " << i << " changed";
}

}  // namespace
}  // namespace mamba
