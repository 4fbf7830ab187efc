#include "tokenizer/text_gen.h"

#include "tokenizer/unicode.h"

#include <random>
#include <string_view>

namespace mamba::test {

namespace {

void append_cp(std::string& out, char32_t cp) { tok::utf8_append(out, cp); }

class Gen {
 public:
  explicit Gen(std::uint64_t seed) : rng_(seed) {}
  std::size_t pick(std::size_t n) { return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_); }
  template <class T, std::size_t N>
  const T& choose(const T (&arr)[N]) { return arr[pick(N)]; }
  char32_t in_range(char32_t lo, char32_t hi) { return static_cast<char32_t>(lo + pick(hi - lo + 1)); }

  void words(std::string& out, int n) {
    static const char* kWords[] = {"the", "of", "and", "house", "Mr.", "Elizabeth", "don't", "it's", "I'm", "we'll",
                                   "naïve", "café", "über", "año", "CamelCase", "snake_case", "x86_64", "e-mail",
                                   "re-enter", "HTTP/1.1", "O'Neil", "you've", "'s", "'ll", "'D", "ALL-CAPS"};
    for (int k = 0; k < n; ++k) {
      if (k) out.push_back(' ');
      out += choose(kWords);
    }
  }
  void code(std::string& out) {
    static const char* kLines[] = {
        "int main(int argc, char** argv) {", "    for (size_t i = 0; i < n; ++i) x[i] += y[i] * 2;",
        "\treturn std::move(result);", "}", "def f(x, *args, **kwargs):", "    return {k: v for k, v in kwargs.items()}",
        "    if (a && !b || c != d) { /* comment */ }", "#include <vector>", "SELECT id, name FROM users WHERE id >= 42;",
        "const re = /\\s+(?!\\S)/gu;  // regex", "x = [1, 2, 3]\t\t# trailing tabs\t", "    \t  mixed indentation",
        "print(f\"{value!r:>10}\")", "<div class=\"a\">&amp;&lt;&gt;</div>", "@@ -1,4 +1,5 @@", "fn main() -> Result<(), Box<dyn Error>> {"};
    const int n = 2 + static_cast<int>(pick(8));
    for (int k = 0; k < n; ++k) {
      out += choose(kLines);
      out += pick(5) == 0 ? "\r\n" : "\n";
    }
  }
  void cjk(std::string& out) {
    const int n = 3 + static_cast<int>(pick(30));
    for (int k = 0; k < n; ++k) {
      switch (pick(6)) {
        case 0: case 1: append_cp(out, in_range(0x4E00, 0x9FA5)); break;   // CJK ideographs
        case 2: append_cp(out, in_range(0x3041, 0x3093)); break;           // hiragana
        case 3: append_cp(out, in_range(0x30A1, 0x30F6)); break;           // katakana
        case 4: append_cp(out, in_range(0xAC00, 0xD7A3)); break;           // hangul syllables
        default: out += choose({"。", "、", "「", "」", "！", "？", "　", "，", "：", "１２３", "ＡＢＣ"}); break;
      }
    }
  }
  void emoji(std::string& out) {
    static const char* kEmoji[] = {"😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "🇯🇵", "❤️", "🏳️‍🌈", "🤖", "🎉🎉🎉", "👩🏻‍💻", "✊🏿",
                                   "☕", "🙂🙃", "🧑‍🚀", "#️⃣", "©", "™", "😀 😃 😄"};
    const int n = 1 + static_cast<int>(pick(6));
    for (int k = 0; k < n; ++k) {
      out += choose(kEmoji);
      if (pick(2)) out.push_back(' ');
    }
  }
  void whitespace(std::string& out) {
    static const char* kWs[] = {" ", "  ", "   ", "    ", "\t", "\n", "\n\n", "\r\n", " \n ", "\u00A0", "\u3000",
                                "\u2009", "\u180E", "\u0085", "\u200B", "\u2028", "\u202F", "\x0B", "\x0C", "        ",
                                // the rest of Unicode White_Space (Oniguruma's \s), each a case of the regex's class
                                "\u1680", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004", "\u2005", "\u2006", "\u2007",
                                "\u2008", "\u200A", "\u2029", "\u205F"};
    const int n = 1 + static_cast<int>(pick(8));
    for (int k = 0; k < n; ++k) out += choose(kWs);
  }
  void numbers(std::string& out) {
    static const char* kNums[] = {"3.14159", "1,000,000", "2024-11-30", "0x1F", "1e-9", "-42", "½", "²³", "٣٤٥", "१२३",
                                  "Ⅻ", "①②", "１２３４", "007", "12345678901234567890", "3rd", "v1.2.3", "99%", "$5.00", "10:30"};
    const int n = 1 + static_cast<int>(pick(6));
    for (int k = 0; k < n; ++k) {
      if (k) out += pick(3) ? " " : "";
      out += choose(kNums);
    }
  }
  void accents(std::string& out) {
    static const char* kAcc[] = {"e\u0301", "a\u0308", "A\u030A", "n\u0303", "\u0301", "o\u0302\u0323", "\u1E9B\u0323",
                                 "Å", "Å", "ﬁ", "ﬀ", "Ω", "Ω", "K", "ḱ", "가", "\u1100\u1161", "Ǆ", "㎒"};
    const int n = 1 + static_cast<int>(pick(8));
    for (int k = 0; k < n; ++k) out += choose(kAcc);
  }
  void scripts(std::string& out) {
    static const char* kTxt[] = {"Привет, мир!", "Γειά σου Κόσμε", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया",
                                 "สวัสดีชาวโลก", "Xin chào thế giới", "Grüß Gott", "Dziękuję", "İstanbul ıI",
                                 "ﷺ", "ǅungla", "Ⓐⓑ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝟘𝟙𝟚"};
    out += choose(kTxt);
  }
  void specials(std::string& out) {
    static const char* kSp[] = {"<|endoftext|>", "<|padding|>", "<s>", "</s>", "<unk>", ">>TITLE<<", "<|im_start|>",
                                "<|im_end|>", " <|im_end|> ", "<|im_start|>  user", "MASK", " MASK ", "xMASK", "MASKy",
                                "ﬁsh", "fish", "<|endoftext|><|endoftext|>", "<|endof", "<0x41>", "▁", "▁▁a"};
    out += choose(kSp);
  }
  void edge(std::string& out) {
    static const char* kEdge[] = {"\x01\x02\x7F", "\uFEFF", "\uFFFD", "\uE000", "\U0010FFFF", "\U0001F600",
                                  "\u00AD", "\u200D", "\u2060", "'", "''", "'s'", "...", "—", "–", "“quoted”",
                                  "‘single’", "«»", "¿¡", "!!!???", "@#$%^&*", "\\\\", "``", "~~~", "_"};
    out += choose(kEdge);
  }

  std::string document(std::size_t max_bytes) {
    std::string out;
    while (out.size() < max_bytes) {
      switch (pick(12)) {
        case 0: case 1: words(out, 1 + static_cast<int>(pick(12))); break;
        case 2: code(out); break;
        case 3: cjk(out); break;
        case 4: emoji(out); break;
        case 5: whitespace(out); break;
        case 6: numbers(out); break;
        case 7: accents(out); break;
        case 8: scripts(out); break;
        case 9: specials(out); break;
        case 10: edge(out); break;
        default: out.push_back(' '); break;
      }
      if (pick(4) == 0) break;
    }
    return out;
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace

std::vector<std::string> generate_documents(std::uint64_t seed, int count, std::size_t max_bytes) {
  Gen g(seed);
  std::vector<std::string> docs;
  docs.reserve(static_cast<std::size_t>(count));
  for (int k = 0; k < count; ++k) docs.push_back(g.document(1 + g.pick(max_bytes)));
  return docs;
}

std::vector<std::string> split_documents(const std::string& text, std::size_t target_bytes) {
  std::vector<std::string> docs;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = std::min(text.size(), pos + target_bytes);
    if (end < text.size()) {
      const std::size_t nl = text.find('\n', end);
      end = nl == std::string::npos ? text.size() : nl + 1;
    }
    docs.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return docs;
}

}  // namespace mamba::test
