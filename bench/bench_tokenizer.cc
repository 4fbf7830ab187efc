// Tokenizer encode throughput (MB/s, one thread) on a multi-MB text, side by side with HF
// tokenizers (npm `tokenizers`, Rust core, run through node in the same program).
//   bench_tokenizer [--text FILE] [--tokenizer FILE]... [--repeats N]
// Defaults: ../shared/data/books-sample.txt; the GPT-NeoX-20B tokenizer and the embedded model's
// 8k tokenizer. Each is timed on the text as one string ("1 str") and as ~2 KB pieces encoded one
// after another ("2KB"). "cold" = first pass after loading (empty word cache), "warm" = best of N.
// Times are process CPU time (user + system) on both sides.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cpu/cpu_time.h"
#include "cpu/parse_args.h"
#include "mamba/tokenizer.h"
#include "tokenizer/text_gen.h"  // tests/tokenizer: split_documents (the ~2 KB split oracle.js also uses)

namespace fs = std::filesystem;

namespace {

struct Timing {
  double cold = 0, warm = 0;
  std::size_t tokens = 0;
  bool ok = false;
};

Timing bench_ours(const std::string& tok_path, const std::vector<std::string>& docs, int repeats, std::string* err) {
  Timing t;
  auto tok = mamba::Tokenizer::from_file(tok_path);
  if (!tok.ok()) {
    *err = tok.error().message;
    return t;
  }
  t.warm = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const double a = mamba::bench::process_cpu_seconds();
    t.tokens = 0;
    for (const auto& d : docs) {
      auto ids = tok->encode(d);
      if (!ids.ok()) {
        *err = ids.error().message;
        return t;
      }
      t.tokens += ids->size();
    }
    const double dt = mamba::bench::process_cpu_seconds() - a;
    if (r == 0) t.cold = dt;
    t.warm = std::min(t.warm, dt);
  }
  t.ok = true;
  return t;
}

Timing bench_hf(const std::string& oracle, const std::string& tok_path, const std::string& text_path, int repeats,
                const char* mode, std::string* err) {
  Timing t;
  const std::string cmd =
      fmt::format("RAYON_NUM_THREADS=1 node '{}' bench '{}' '{}' {} {} 2>&1", oracle, tok_path, text_path, repeats, mode);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    *err = "cannot run node";
    return t;
  }
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int rc = pclose(p);
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (rc != 0 || j.is_discarded() || !j.contains("best")) {
    *err = "node failed: " + out.substr(0, 300);
    return t;
  }
  t.cold = j["first"].get<double>();
  t.warm = j["best"].get<double>();
  t.tokens = j["tokens"].get<std::size_t>();
  t.ok = true;
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each row as it is measured, also into a pipe
  const fs::path src = MAMBA_SOURCE_DIR;  // __FILE__ is relative to the build directory
  const fs::path shared = src / ".." / "shared";
  std::string text_path = (shared / "data/books-sample.txt").string();
  std::vector<std::string> toks;
  int repeats = 2;
  CLI::App app{"Tokenizer encode throughput vs HF tokenizers (npm)"};
  app.add_option("--text", text_path, "UTF-8 text file to encode as one string");
  app.add_option("--tokenizer", toks, "tokenizer.json files (repeatable)");
  app.add_option("--repeats", repeats, "encodes per tokenizer (best is reported as warm)")->check(CLI::Range(1, 100));
  if (const auto rc = mamba::bench::parse_args(app, argc, argv)) return *rc;
  if (toks.empty()) {
    toks = {(shared / "tokenizer/gpt-neox-20b.json").string(), (shared / "models/mamba2-books-7m-bpe8k/tokenizer.json").string()};
  }
  std::ifstream f(text_path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "error: cannot read %s\n", text_path.c_str());
    return 2;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  if (text.empty()) {
    std::fprintf(stderr, "error: %s is empty (nothing to time)\n", text_path.c_str());
    return 2;
  }
  const double mb = static_cast<double>(text.size()) / 1e6;
  const std::string oracle = (src / "tests/node/oracle.js").string();
  const bool have_hf = fs::exists(src / "tests/node/node_modules/tokenizers") && std::system("node --version >/dev/null 2>&1") == 0;

  std::printf("text: %s (%.2f MB), one thread, %d passes per row, MB/s of process CPU time\n", text_path.c_str(), mb, repeats);
  if (!have_hf) std::printf("(HF column empty: node or tests/node/node_modules missing; run npm install in tests/node)\n");
  std::printf("%-34s %12s %12s %12s %12s %10s %10s %8s\n", "tokenizer (input)", "ours cold", "ours warm", "HF cold", "HF warm", "warm x", "cold x",
              "ids");
  std::printf("%-34s %12s %12s %12s %12s %10s %10s %8s\n", "", "MB/s", "MB/s", "MB/s", "MB/s", "ours/HF", "ours/HF", "");
  const std::vector<std::string> whole{text};
  const std::vector<std::string> docs = mamba::test::split_documents(text, 2048);
  int failed = 0;  // rows our tokenizer could not run: the exit status says so
  for (const auto& tp : toks) {
    for (const char* mode : {"whole", "docs"}) {
      std::string err;
      const Timing ours = bench_ours(tp, std::string(mode) == "whole" ? whole : docs, repeats, &err);
      std::string name = fs::path(tp).parent_path().filename().string() + "/" + fs::path(tp).filename().string();
      if (name.size() > 26) name = "..." + name.substr(name.size() - 23);  // the cut is marked
      name += std::string(mode) == "whole" ? " (1 str)" : " (2KB)";
      if (!ours.ok) {
        std::printf("%-34s error: %s\n", name.c_str(), err.c_str());
        ++failed;
        continue;
      }
      Timing hf;
      if (have_hf) hf = bench_hf(oracle, tp, text_path, repeats, mode, &err);
      if (hf.ok) {
        std::printf("%-34s %12.2f %12.2f %12.2f %12.2f %9.2fx %9.2fx %8s\n", name.c_str(), mb / ours.cold, mb / ours.warm,
                    mb / hf.cold, mb / hf.warm, hf.warm / ours.warm, hf.cold / ours.cold, ours.tokens == hf.tokens ? "same" : "DIFFER");
      } else {
        std::printf("%-34s %12.2f %12.2f %12s %12s %10s %10s %8s   %s\n", name.c_str(), mb / ours.cold, mb / ours.warm, "-", "-", "-",
                    "-", "-", err.c_str());
      }
    }
  }
  if (failed > 0) {
    std::fprintf(stderr, "error: %d row(s) failed (see above)\n", failed);
    return 1;
  }
  return 0;
}
