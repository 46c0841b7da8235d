// Byte-level BPE over raw bytes: start from one token per byte, repeatedly merge the adjacent pair
// with the lowest merge rank (leftmost on ties). Works for HF merges lists and tiktoken rank files,
// which differ only in where the pair ranks come from.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dllmq {

class BpeModel {
 public:
  // Registers token `id` with its raw bytes; the last registration of a byte string wins lookups.
  void add_token(int32_t id, std::string bytes);
  // Pair (a, b) merges into `merged` with priority `rank` (lower first). A repeated pair keeps the
  // last rank given, as HF does.
  void add_merge(int32_t a, int32_t b, int32_t merged, uint32_t rank);
  // Derives merges from ranks as tiktoken does: pair (a, b) has the rank of bytes(a)+bytes(b) when
  // that is a token. Call after all add_token.
  void derive_merges_from_ranks();
  // HF ignore_merges (and tiktoken always): a piece that is itself a token is emitted whole.
  void set_ignore_merges(bool v) { ignore_merges_ = v; }
  void set_unk(std::optional<int32_t> unk) { unk_ = unk; }
  // The per-piece cache (on by default); off only to measure raw merging speed.
  void set_cache_enabled(bool v) { cache_enabled_ = v; }
  // Call once after the last add_token, before encoding.
  void finalize();

  // Appends the ids of one pre-tokenized piece.
  void encode_piece(std::string_view bytes, std::vector<int32_t>& out) const;

  std::optional<int32_t> find(std::string_view bytes) const;
  // Raw bytes of `id`, or nullptr for an id that is not a model token.
  const std::string* bytes_of(int32_t id) const;
  size_t size() const { return n_tokens_; }
  int32_t max_id() const { return static_cast<int32_t>(id_bytes_.size()) - 1; }
  size_t n_merges() const { return n_merges_; }

 private:
  struct Merge {
    uint32_t rank;
    int32_t merged;
  };
  // Open-addressing map (a,b) -> Merge; the hot lookup of encoding.
  struct PairMap {
    std::vector<uint64_t> keys;
    std::vector<Merge> vals;
    size_t count = 0, mask = 0;
    static constexpr uint64_t kEmpty = ~0ull;
    void reserve(size_t n);
    Merge* find(uint64_t key);
    const Merge* find(uint64_t key) const;
    void insert(uint64_t key, Merge m);  // keeps the lower rank
  };
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  const Merge* lookup(int32_t a, int32_t b) const { return pairs_.find(key(a, b)); }
  void merge_small(std::vector<int32_t>& syms) const;
  void merge_large(std::vector<int32_t>& syms) const;

  // Open-addressing map bytes -> id; keys live in id_bytes_. A slot packs (hash tag << 32) | (id +
  // 1), 0 = empty, so a probe costs one cache line and most mismatches skip the byte comparison.
  struct BytesMap {
    std::vector<uint64_t> slots;
    size_t count = 0, mask = 0;
  };
  static uint64_t hash_bytes(std::string_view s);
  int32_t bytes_find(std::string_view s) const;
  void bytes_insert(int32_t id);

  std::vector<std::string> id_bytes_;
  std::vector<uint8_t> has_id_;
  BytesMap by_bytes_;
  int32_t byte_id_[256] = {};
  PairMap pairs_;
  size_t n_tokens_ = 0, n_merges_ = 0;
  bool ignore_merges_ = false;
  bool cache_enabled_ = true;
  std::optional<int32_t> unk_;

  // Per-piece cache: most words repeat. Direct-mapped, one 64-byte line per entry, so a lookup is
  // one memory access; a colliding piece simply replaces the old one. Guarded for concurrent
  // encode() calls.
  struct CacheEntry {
    uint32_t tag = 0;     // hash bits; with key_len 0 the entry is empty
    uint8_t key_len = 0;  // 1..kCacheKey
    uint8_t n_ids = 0;
    char key[22];
    int32_t ids[9];
  };
  static constexpr size_t kCacheKey = 22, kCacheIds = 9, kCacheSlots = 1 << 16;
  mutable std::mutex cache_mu_;
  mutable std::vector<CacheEntry> cache_;
};

}  // namespace dllmq
