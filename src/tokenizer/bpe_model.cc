#include "tokenizer/bpe_model.h"

#include <fmt/format.h>

#include <queue>

#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"

namespace mamba::tok {

namespace {

std::uint64_t pair_key(std::int32_t a, std::int32_t b) {
  return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
}

}  // namespace

Result<std::unique_ptr<BpeModel>> BpeModel::create(StringMap<std::int32_t> vocab,
                                                   const std::vector<std::pair<std::string, std::string>>& merges,
                                                   BpeOptions options, const std::string& where) {
  std::unique_ptr<BpeModel> m(new BpeModel());
  std::int32_t max_id = -1;
  for (const auto& [tok, id] : vocab) {
    if (id < 0) return make_error(ErrorCode::kFormat, fmt::format("{}: model.vocab['{}']: negative id {}", where, tok, id));
    max_id = std::max(max_id, id);
  }
  m->id_to_token_.resize(static_cast<std::size_t>(max_id + 1));
  m->id_defined_.assign(static_cast<std::size_t>(max_id + 1), false);
  for (const auto& [tok, id] : vocab) {
    // Several tokens with one id: keep the smallest token text, deterministically.
    auto& slot = m->id_to_token_[static_cast<std::size_t>(id)];
    if (!m->id_defined_[static_cast<std::size_t>(id)] || tok < slot) slot = tok;
    m->id_defined_[static_cast<std::size_t>(id)] = true;
  }
  m->vocab_.reserve(vocab.size());
  for (const auto& [tok, id] : vocab) m->vocab_.insert(tok, id);
  const std::size_t prefix_len = options.continuing_subword_prefix ? options.continuing_subword_prefix->size() : 0;
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const std::int32_t* ia = m->vocab_.find(a);
    const std::int32_t* ib = m->vocab_.find(b);
    if (!ia || !ib) {
      return make_error(ErrorCode::kFormat, fmt::format("{}: model.merges[{}] = ['{}', '{}']: token '{}' is not in the vocab",
                                                        where, rank, a, b, !ia ? a : b));
    }
    std::string merged = a;
    merged.append(b.size() >= prefix_len && b.compare(0, prefix_len, options.continuing_subword_prefix.value_or("")) == 0
                      ? std::string_view(b).substr(prefix_len)
                      : std::string_view(b));
    const std::int32_t* im = m->vocab_.find(merged);
    if (!im) {
      return make_error(ErrorCode::kFormat, fmt::format("{}: model.merges[{}] = ['{}', '{}']: merged token '{}' is not in the vocab",
                                                        where, rank, a, b, merged));
    }
    // Later duplicates overwrite earlier ones, as HF's HashMap collect does.
    m->merges_.insert(pair_key(*ia, *ib), {static_cast<std::int32_t>(rank), *im});
  }
  if (options.unk_token) {
    if (const std::int32_t* id = m->vocab_.find(*options.unk_token)) m->unk_id_ = *id;
  }
  m->all_byte_fallback_ = true;
  for (int b = 0; b < 256; ++b) {
    const std::int32_t* id = m->vocab_.find(fmt::format("<0x{:02X}>", b));
    m->byte_fallback_ids_[b] = id ? *id : -1;
    if (!id) m->all_byte_fallback_ = false;
  }
  m->options_ = std::move(options);
  return m;
}

std::optional<std::int32_t> BpeModel::token_to_id(std::string_view token) const {
  const std::int32_t* id = vocab_.find(token);
  if (!id) return std::nullopt;
  return *id;
}

const std::string* BpeModel::id_to_token(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= id_to_token_.size() || !id_defined_[static_cast<std::size_t>(id)]) return nullptr;
  return &id_to_token_[static_cast<std::size_t>(id)];
}

const BpeModel::MergeValue* BpeModel::find_merge(std::int32_t a, std::int32_t b) const {
  return merges_.find(pair_key(a, b));
}

void BpeModel::initial_symbols(std::string_view word, std::vector<std::int32_t>& ids) const {
  // HF BPE::merge_word: unknown characters accumulate into a pending unk (fused when fuse_unk).
  std::int32_t pending_unk = -1;  // -1: none
  std::string buf;
  std::size_t i = 0;
  while (i < word.size()) {
    const std::size_t b = i;
    i += utf8_len(static_cast<unsigned char>(word[b]));
    if (i > word.size()) i = word.size();
    std::string_view s = word.substr(b, i - b);
    const bool is_first = b == 0, is_last = i == word.size();
    if ((!is_first && options_.continuing_subword_prefix) || (is_last && options_.end_of_word_suffix)) {
      buf.clear();
      if (!is_first && options_.continuing_subword_prefix) buf.append(*options_.continuing_subword_prefix);
      buf.append(s);
      if (is_last && options_.end_of_word_suffix) buf.append(*options_.end_of_word_suffix);
      s = buf;
    }
    if (const std::int32_t* id = vocab_.find(s)) {
      if (pending_unk >= 0) ids.push_back(pending_unk);
      pending_unk = -1;
      ids.push_back(*id);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (char c : s) all &= byte_fallback_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        // HF pushes byte tokens without flushing a pending unk first (it stays pending).
        for (char c : s) ids.push_back(byte_fallback_ids_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (options_.unk_token) {
      if (!unk_id_) continue;  // HF errors here (unk token not in vocab); we drop the character
      if (pending_unk >= 0 && !options_.fuse_unk) ids.push_back(pending_unk);
      pending_unk = *unk_id_;
    }
  }
  if (pending_unk >= 0) ids.push_back(pending_unk);
}

void BpeModel::merge_all(std::vector<std::int32_t>& ids) const {
  const std::size_t n = ids.size();
  if (n < 2) return;
  if (n <= 24) {
    // Short words: repeatedly merge the lowest-rank adjacent pair (leftmost on ties).
    std::size_t len = n;
    while (len > 1) {
      std::int32_t best_rank = INT32_MAX, best_id = -1;
      std::size_t best_pos = 0;
      for (std::size_t p = 0; p + 1 < len; ++p) {
        const MergeValue* m = find_merge(ids[p], ids[p + 1]);
        if (m && m->rank < best_rank) {
          best_rank = m->rank;
          best_id = m->new_id;
          best_pos = p;
        }
      }
      if (best_id < 0) break;
      ids[best_pos] = best_id;
      ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(best_pos) + 1);
      --len;
    }
    return;
  }
  // Long words: HF Word::merge_all — a doubly linked list of symbols and a min-heap of
  // (rank, position) candidate merges, stale entries skipped.
  struct Symbol {
    std::int32_t id, prev, next;
    bool alive;
  };
  std::vector<Symbol> sym(n);
  for (std::size_t k = 0; k < n; ++k) {
    sym[k] = {ids[k], static_cast<std::int32_t>(k) - 1, k + 1 < n ? static_cast<std::int32_t>(k + 1) : -1, true};
  }
  struct Cand {
    std::int32_t rank, pos, new_id;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  for (std::size_t k = 0; k + 1 < n; ++k) {
    if (const MergeValue* m = find_merge(ids[k], ids[k + 1])) heap.push({m->rank, static_cast<std::int32_t>(k), m->new_id});
  }
  while (!heap.empty()) {
    const Cand top = heap.top();
    heap.pop();
    Symbol& left = sym[static_cast<std::size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = sym[static_cast<std::size_t>(left.next)];
    const MergeValue* m = find_merge(left.id, right.id);
    if (!m || m->new_id != top.new_id) continue;
    left.id = top.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[static_cast<std::size_t>(right.next)].prev = top.pos;
    if (left.prev >= 0) {
      const Symbol& p = sym[static_cast<std::size_t>(left.prev)];
      if (const MergeValue* pm = find_merge(p.id, left.id)) heap.push({pm->rank, left.prev, pm->new_id});
    }
    if (left.next >= 0) {
      const Symbol& nx = sym[static_cast<std::size_t>(left.next)];
      if (const MergeValue* nm = find_merge(left.id, nx.id)) heap.push({nm->rank, top.pos, nm->new_id});
    }
  }
  ids.clear();
  for (std::int32_t k = 0; k >= 0; k = sym[static_cast<std::size_t>(k)].next) ids.push_back(sym[static_cast<std::size_t>(k)].id);
}

void BpeModel::tokenize(std::string_view word, bool raw_bytes, std::vector<std::int32_t>& out) const {
  if (word.empty()) return;
  const bool cacheable = word.size() < kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (const CacheEntry* e = cache_.find(word)) {
      const std::int32_t* p = cache_ids_.data() + e->offset;
      out.insert(out.end(), p, p + e->count);
      return;
    }
  }
  std::string mapped;
  std::string_view text = word;
  if (raw_bytes) {
    mapped.reserve(word.size() * 2);
    byte_level_encode(word, mapped);
    text = mapped;
  }
  std::vector<std::int32_t> ids;
  if (const std::int32_t* id = options_.ignore_merges ? vocab_.find(text) : nullptr) {
    ids.push_back(*id);
  } else {
    ids.reserve(text.size());
    initial_symbols(text, ids);
    merge_all(ids);
  }
  out.insert(out.end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_.size() < kCacheCapacity && !cache_.find(word)) {
      cache_.insert(word, {static_cast<std::uint32_t>(cache_ids_.size()), static_cast<std::uint32_t>(ids.size())});
      cache_ids_.insert(cache_ids_.end(), ids.begin(), ids.end());
    }
  }
}

}  // namespace mamba::tok
