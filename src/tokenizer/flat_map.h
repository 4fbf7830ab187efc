// Open-addressing hash maps for the tokenizer's hot lookups (vocab, merges, word cache):
// linear probing over a power-of-two table, hashes stored, keys in one arena. libstdc++'s
// unordered_map with string_view lookups re-hashes bucket neighbours and was the top cost of
// encode in profiles.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace mamba::tok {

/// 64-bit hash of a byte string (8 bytes at a time, multiply-xorshift mixing).
inline std::uint64_t hash_bytes(std::string_view s) {
  constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ULL;
  std::uint64_t h = s.size() * kMul;
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  if (i < s.size()) {
    std::uint64_t w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  // murmur3 fmix64: every input bit affects the low bits used as the table index.
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDULL;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ULL;
  return h ^ (h >> 33);
}

/// String → V map (insert / find only). Keys are copied into an arena.
template <class V>
class FlatStringMap {
 public:
  std::size_t size() const { return size_; }

  /// Pointer to the value of `key`, or nullptr.
  const V* find(std::string_view key) const {
    if (slots_.empty()) return nullptr;
    const std::uint64_t h = hash_bytes(key);
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.len == kEmpty) return nullptr;
      if (s.hash == h && s.len == key.size() && std::memcmp(arena_.data() + s.off, key.data(), key.size()) == 0) return &s.value;
    }
  }

  /// Inserts or overwrites.
  void insert(std::string_view key, V value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    const std::uint64_t h = hash_bytes(key);
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.len == kEmpty) {
        s = {h, arena_.size(), static_cast<std::uint32_t>(key.size()), std::move(value)};
        arena_.append(key);
        ++size_;
        return;
      }
      if (s.hash == h && s.len == key.size() && std::memcmp(arena_.data() + s.off, key.data(), key.size()) == 0) {
        s.value = std::move(value);
        return;
      }
    }
  }

  void reserve(std::size_t n) {
    while (slots_.size() < n * 2) grow();
  }

 private:
  static constexpr std::uint32_t kEmpty = 0xFFFFFFFFu;
  struct Slot {
    std::uint64_t hash = 0;
    std::size_t off = 0;
    std::uint32_t len = kEmpty;
    V value{};
  };
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (auto& s : old) {
      if (s.len == kEmpty) continue;
      std::size_t i = s.hash & mask_;
      while (slots_[i].len != kEmpty) i = (i + 1) & mask_;
      slots_[i] = std::move(s);
    }
  }
  std::vector<Slot> slots_;
  std::string arena_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

/// uint64 → V map (insert / find only); key ~0 is reserved.
template <class V>
class FlatU64Map {
 public:
  const V* find(std::uint64_t key) const {
    if (slots_.empty()) return nullptr;
    for (std::size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == kEmpty) return nullptr;
    }
  }
  void insert(std::uint64_t key, V value) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    for (std::size_t i = mix(key) & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (s.key == key) {
        s.value = value;
        return;
      }
      if (s.key == kEmpty) {
        s = {key, value};
        ++size_;
        return;
      }
    }
  }

 private:
  static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
  struct Slot {
    std::uint64_t key = kEmpty;
    V value{};
  };
  static std::uint64_t mix(std::uint64_t k) {  // murmur3 fmix64
    k ^= k >> 33;
    k *= 0xFF51AFD7ED558CCDULL;
    k ^= k >> 33;
    k *= 0xC4CEB9FE1A85EC53ULL;
    return k ^ (k >> 33);
  }
  void grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
    mask_ = slots_.size() - 1;
    for (auto& s : old) {
      if (s.key == kEmpty) continue;
      std::size_t i = mix(s.key) & mask_;
      while (slots_[i].key != kEmpty) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }
  std::vector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace mamba::tok
