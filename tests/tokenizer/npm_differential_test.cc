// Differential test against HF tokenizers itself (npm `tokenizers`, the Rust core): several MB of
// text — ../shared/data/books-sample.txt plus documents generated here (code, CJK, emoji,
// whitespace runs, numbers, combining marks, added-token markers) — encoded and decoded by both
// for the GPT-NeoX tokenizer, the tokenizers of mamba2-books-16m and mamba2-books-7m-bpe8k, and
// tokenizer.json files built by tests/node/oracle.js for the Falcon-Mamba, Llama-3-style split,
// Mistral (legacy and Metaspace) and other pipelines. Expected: 0 mismatches of ids, decoded
// text, ids with special tokens and decode of arbitrary id lists; StreamDecoder reproduces decode.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "common/test_util.h"
#include "mamba/tokenizer.h"
#include "tokenizer/text_gen.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool have_node_oracle(std::string* why) {
  const fs::path pkg = fs::path(mamba::test::source_dir()) / "tests/node/node_modules/tokenizers/package.json";
  if (std::system("node --version >/dev/null 2>&1") != 0) {
    *why = "node is not installed";
    return false;
  }
  if (!fs::exists(pkg)) {
    *why = "npm package 'tokenizers' is missing (run: cd tests/node && npm install)";
    return false;
  }
  return true;
}

void write_file(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f << s;
}

// FNV-1a over several strings: cache keys for the oracle's outputs.
std::string content_key(std::initializer_list<std::string_view> parts) {
  std::uint64_t h = 1469598103934665603ULL;
  for (std::string_view p : parts) {
    for (unsigned char c : p) h = (h ^ c) * 1099511628211ULL;
    h = (h ^ 0xFF) * 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string show(const std::string& s, std::size_t max = 160) {
  return json(s.substr(0, max)).dump(-1, ' ', false, json::error_handler_t::replace);
}

TEST(TokenizerNpmDifferential, ZeroMismatches) {
  MAMBA_REQUIRE_SHARED(shared);
  std::string why;
  if (!have_node_oracle(&why)) {
    if (mamba::test::in_ci()) FAIL() << why << " but CI=true: the npm differential test is required";
    GTEST_SKIP() << why << "; skipping the npm differential test";
  }
  const fs::path dir = fs::path(mamba::test::binary_dir()) / "tokenizer-npm-diff";
  fs::create_directories(dir);
  const std::string oracle = mamba::test::source_dir() + "/tests/node/oracle.js";
  const std::string neox = shared + "/tokenizer/gpt-neox-20b.json";

  // Documents: the books in ~2 KB pieces, plus generated text. The GPT-NeoX and 8k tokenizers get
  // all of it; the other pipelines the generated text and every 4th book piece (HF's own encode is
  // the slow side of this test).
  const std::vector<std::string> books =
      mamba::test::split_documents(mamba::test::read_file(shared + "/data/books-sample.txt"), 2048);
  const std::vector<std::string> generated = mamba::test::generate_documents(20261130, 4000, 500);
  std::map<std::string, std::vector<std::string>> doc_sets;
  auto& all = doc_sets["all"];
  all = books;
  all.insert(all.end(), generated.begin(), generated.end());
  // Long documents (≥ 150 KB): our encode cuts such text after a '\n' between two visible ASCII
  // characters (tokenizer/impl.h newline_cuts), HF encodes it whole. Lines of the books and of the
  // generated text, and lines whose ends meet as contractions, digits, punctuation and markers do.
  {
    std::mt19937 pick(11);
    const std::string visible = "abcXYZ019'.,;:!?-_()[]{}<>|\"#$%&*+/=@\\^`~";
    for (std::size_t target : {150000u, 220000u, 180000u}) {
      std::string doc;
      while (doc.size() < target) {
        const std::uint32_t r = pick() % 4;
        if (r == 0) doc += books[pick() % books.size()];
        else if (r == 1) doc += generated[pick() % generated.size()];
        else
          for (int j = 0; j < 40; ++j) {
            doc += visible[pick() % visible.size()];
            doc += (j % 7 == 3) ? "'s" : (j % 7 == 5) ? "'ll" : "";
            doc += '\n';
          }
        doc += '\n';
      }
      all.push_back(doc);
    }
  }
  auto& sample = doc_sets["sample"];
  sample = generated;
  for (std::size_t k = 0; k < books.size(); k += 4) sample.push_back(books[k]);
  sample.insert(sample.end(), all.end() - 3, all.end());
  std::size_t total = 0;
  for (const auto& d : all) total += d.size();
  ASSERT_GT(total, 3000000u) << "expected several MB of text";
  for (const auto& [set, docs] : doc_sets) write_file(dir / ("docs-" + set + ".json"), json(docs).dump());

  // Arbitrary id lists for decode (reduced modulo each tokenizer's size by the oracle and here).
  std::mt19937 rng(7);
  json decode_cases = json::array();
  for (int k = 0; k < 300; ++k) {
    json ids = json::array();
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) ids.push_back(k % 3 == 0 ? rng() % 300 : rng() % 60000);
    decode_cases.push_back(ids);
  }
  write_file(dir / "decode.json", decode_cases.dump());

  // HF's results are cached under tests/node/.oracle-cache, keyed by everything they depend on
  // (oracle.js, the npm package version, the tokenizer file, the documents), so a second build
  // tree (e.g. the ASan one) does not pay for HF again.
  const fs::path cache = fs::path(mamba::test::source_dir()) / "tests/node/.oracle-cache";
  fs::create_directories(cache);
  const std::string oracle_src = mamba::test::read_file(oracle);
  const std::string npm_pkg =
      mamba::test::read_file(mamba::test::source_dir() + "/tests/node/node_modules/tokenizers/package.json");
  const std::string quiet = " >" + (dir / "node.log").string() + " 2>&1";
  const fs::path pipelines = cache / ("pipelines-" + content_key({oracle_src, npm_pkg, mamba::test::read_file(neox)}));
  // Drops cache entries of `prefix` other than `keep` (stale results of earlier inputs).
  auto prune = [&](const std::string& prefix, const fs::path& keep) {
    for (const auto& e : fs::directory_iterator(cache)) {
      const std::string n = e.path().filename().string();
      if (n.rfind(prefix, 0) == 0 && e.path() != keep) fs::remove_all(e.path());
    }
  };
  if (!fs::exists(pipelines)) {
    prune("pipelines-", pipelines);
    const fs::path tmp = dir / "pipelines";
    fs::remove_all(tmp);
    ASSERT_EQ(std::system(("node " + oracle + " build " + tmp.string() + " " + neox + quiet).c_str()), 0)
        << "oracle build failed; see " << (dir / "node.log");
    std::error_code ec;
    fs::rename(tmp, pipelines, ec);
    if (ec) fs::copy(tmp, pipelines, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  }
  struct Case {
    std::string name, path, docs;
  };
  std::vector<Case> toks = {
      {"gpt-neox-20b", neox, "all"},
      {"mamba2-books-16m", shared + "/models/mamba2-books-16m/tokenizer.json", "sample"},
      {"mamba2-books-7m-bpe8k", shared + "/models/mamba2-books-7m-bpe8k/tokenizer.json", "all"},
  };
  for (const char* p : {"falcon-like", "llama3-split-like", "neox-digits", "mistral-legacy", "mistral-metaspace", "metaspace-always"}) {
    toks.push_back({p, (pipelines / (std::string(p) + ".json")).string(), "sample"});
  }
  const std::string decode_text = decode_cases.dump();
  std::map<std::string, std::string> docs_text;
  for (const auto& [set, docs] : doc_sets) docs_text[set] = json(docs).dump();
  std::vector<fs::path> results(toks.size());
  json spec = {{"docs", {{"all", (dir / "docs-all.json").string()}, {"sample", (dir / "docs-sample.json").string()}}},
               {"decode", (dir / "decode.json").string()},
               {"tokenizers", json::array()}};
  std::vector<std::pair<fs::path, fs::path>> to_cache;  // (fresh output, cache path)
  for (std::size_t t = 0; t < toks.size(); ++t) {
    const auto& c = toks[t];
    results[t] = cache / (c.name + "-" + content_key({oracle_src, npm_pkg, mamba::test::read_file(c.path), docs_text[c.docs], decode_text}) + ".json");
    if (fs::exists(results[t])) continue;
    const fs::path fresh = dir / (c.name + ".out.json");
    spec["tokenizers"].push_back({{"name", c.name}, {"path", c.path}, {"docs", c.docs}, {"out", fresh.string()}});
    to_cache.emplace_back(fresh, results[t]);
  }
  write_file(dir / "spec.json", spec.dump());
  // HF runs in the background while we encode.
  int oracle_rc = -1;
  std::thread oracle_thread([&] {
    oracle_rc = spec["tokenizers"].empty() ? 0 : std::system(("node " + oracle + " run " + (dir / "spec.json").string() + quiet).c_str());
  });
  std::vector<std::vector<std::vector<std::int32_t>>> ours(toks.size());
  std::vector<std::string> load_errors(toks.size());
  std::vector<std::optional<mamba::Tokenizer>> loaded(toks.size());
  for (std::size_t t = 0; t < toks.size(); ++t) {
    auto r = mamba::Tokenizer::from_file(toks[t].path);
    if (!r.ok()) {
      load_errors[t] = r.error().message;
      continue;
    }
    loaded[t].emplace(std::move(r).value());
    const mamba::Tokenizer* tok = &*loaded[t];
    for (const auto& d : doc_sets[toks[t].docs]) {
      auto ids = tok->encode(d);
      ours[t].push_back(ids.ok() ? std::move(*ids) : std::vector<std::int32_t>{-1});
    }
  }
  oracle_thread.join();
  ASSERT_EQ(oracle_rc, 0) << "oracle run failed; see " << (dir / "node.log");
  for (const auto& [fresh, cached] : to_cache) {
    const std::string n = cached.filename().string();
    prune(n.substr(0, n.size() - std::string("0123456789abcdef.json").size()), cached);
    std::error_code ec;
    fs::rename(fresh, cached, ec);
    if (ec) fs::copy_file(fresh, cached, fs::copy_options::overwrite_existing);
  }

  for (std::size_t t = 0; t < toks.size(); ++t) {
    const std::string& name = toks[t].name;
    const std::vector<std::string>& docs = doc_sets[toks[t].docs];
    SCOPED_TRACE(name);
    ASSERT_TRUE(load_errors[t].empty()) << load_errors[t];
    const mamba::Tokenizer* tok = &*loaded[t];
    const json want = json::parse(mamba::test::read_file(results[t].string()));
    EXPECT_EQ(tok->size(), want["size"].get<std::int64_t>());
    int id_mismatch = 0, dec_mismatch = 0, special_mismatch = 0, case_mismatch = 0, stream_mismatch = 0;
    for (std::size_t k = 0; k < docs.size(); ++k) {
      const std::vector<std::int32_t> hf_ids = want["ids"][k];
      const std::vector<std::int32_t>* ids = &ours[t][k];
      if (*ids != hf_ids && ++id_mismatch <= 3) {
        std::size_t at = 0;
        while (at < ids->size() && at < hf_ids.size() && (*ids)[at] == hf_ids[at]) ++at;
        ADD_FAILURE() << "ids differ for doc " << k << (toks[t].docs == "all" && k < books.size() ? " (books)" : "") << " at token " << at
                      << ": ours " << (at < ids->size() ? (*ids)[at] : -1) << " HF " << (at < hf_ids.size() ? hf_ids[at] : -1)
                      << "; doc " << show(docs[k], 400);
      }
      auto dec = tok->decode(hf_ids);
      ASSERT_TRUE(dec.ok()) << dec.error().message;
      if (*dec != want["decoded"][k].get<std::string>() && ++dec_mismatch <= 3) {
        ADD_FAILURE() << "decode differs for doc " << k << ": ours " << show(*dec) << " HF " << show(want["decoded"][k]);
      }
      if (k < want["with_specials"].size()) {
        auto sp = tok->encode(docs[k], true);
        ASSERT_TRUE(sp.ok());
        if (*sp != want["with_specials"][k].get<std::vector<std::int32_t>>() && ++special_mismatch <= 3) {
          ADD_FAILURE() << "ids with special tokens differ for doc " << k;
        }
      }
      // StreamDecoder, on a sample of documents: pushes + flush == decode(all).
      if (k % 7 == 0) {
        mamba::StreamDecoder sd(*tok);
        std::string streamed;
        for (std::int32_t id : hf_ids) {
          auto piece = sd.push(id);
          ASSERT_TRUE(piece.ok());
          streamed += *piece;
        }
        streamed += sd.flush();
        if (streamed != *dec && ++stream_mismatch <= 3) {
          ADD_FAILURE() << "stream decode differs for doc " << k << ": " << show(streamed) << " vs " << show(*dec);
        }
      }
    }
    const std::int64_t size = want["size"];
    for (std::size_t k = 0; k < decode_cases.size(); ++k) {
      std::vector<std::int32_t> ids;
      for (const auto& v : decode_cases[k]) ids.push_back(static_cast<std::int32_t>(v.get<std::int64_t>() % size));
      auto plain = tok->decode(ids, false);
      auto skip = tok->decode(ids, true);
      ASSERT_TRUE(plain.ok() && skip.ok());
      if ((*plain != want["decode_cases"][k][0].get<std::string>() || *skip != want["decode_cases"][k][1].get<std::string>()) &&
          ++case_mismatch <= 3) {
        ADD_FAILURE() << "decode of id list " << decode_cases[k].dump() << ": ours " << show(*plain) << " / " << show(*skip)
                      << ", HF " << show(want["decode_cases"][k][0]) << " / " << show(want["decode_cases"][k][1]);
      }
    }
    EXPECT_EQ(id_mismatch, 0) << "documents with different ids (of " << docs.size() << ")";
    EXPECT_EQ(dec_mismatch, 0) << "documents with different decode";
    EXPECT_EQ(special_mismatch, 0) << "documents with different ids when adding special tokens";
    EXPECT_EQ(case_mismatch, 0) << "id lists with different decode";
    EXPECT_EQ(stream_mismatch, 0) << "documents whose stream decode differs";
  }
}

}  // namespace
