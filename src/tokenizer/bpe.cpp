#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstring>
#include <queue>

namespace dllmq {

namespace {
constexpr uint32_t kNoRank = ~0u;
constexpr size_t kSmallWord = 40;  // linear scans beat a heap below this many symbols
}  // namespace

void BpeModel::PairMap::reserve(size_t n) {
  size_t cap = 16;
  while (cap < n * 2) cap <<= 1;
  std::vector<uint64_t> old_keys = std::move(keys);
  std::vector<Merge> old_vals = std::move(vals);
  keys.assign(cap, kEmpty);
  vals.assign(cap, Merge{kNoRank, -1});
  mask = cap - 1;
  count = 0;
  for (size_t i = 0; i < old_keys.size(); ++i)
    if (old_keys[i] != kEmpty) insert(old_keys[i], old_vals[i]);
}

static inline size_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return static_cast<size_t>(k);
}

const BpeModel::Merge* BpeModel::PairMap::find(uint64_t key) const {
  if (keys.empty()) return nullptr;
  for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    if (keys[i] == key) return &vals[i];
    if (keys[i] == kEmpty) return nullptr;
  }
}

BpeModel::Merge* BpeModel::PairMap::find(uint64_t key) {
  return const_cast<Merge*>(static_cast<const PairMap*>(this)->find(key));
}

void BpeModel::PairMap::insert(uint64_t key, Merge m) {
  if ((count + 1) * 2 > keys.size()) reserve(std::max<size_t>(count + 1, keys.size()));
  for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    if (keys[i] == key) {
      vals[i] = m;  // HF builds its merge map with collect(): a repeated pair keeps the last rank
      return;
    }
    if (keys[i] == kEmpty) {
      keys[i] = key;
      vals[i] = m;
      ++count;
      return;
    }
  }
}

uint64_t BpeModel::hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    __builtin_memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  }
  uint64_t w = 0;
  __builtin_memcpy(&w, s.data() + i, s.size() - i);
  h ^= w;
  // murmur3 finalizer: every input bit reaches the low bits used as the slot index.
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

int32_t BpeModel::bytes_find(std::string_view s) const {
  if (by_bytes_.slots.empty()) return -1;
  const uint64_t h = hash_bytes(s);
  const uint64_t tag = h >> 32;
  for (size_t i = h & by_bytes_.mask;; i = (i + 1) & by_bytes_.mask) {
    const uint64_t v = by_bytes_.slots[i];
    if (v == 0) return -1;
    const uint32_t id1 = static_cast<uint32_t>(v);
    if ((v >> 32) == tag && id_bytes_[id1 - 1] == s) return static_cast<int32_t>(id1 - 1);
  }
}

void BpeModel::bytes_insert(int32_t id) {
  auto& m = by_bytes_;
  if ((m.count + 1) * 2 > m.slots.size()) {
    const size_t cap = std::max<size_t>(1024, m.slots.size() * 2);
    std::vector<uint64_t> old = std::move(m.slots);
    m.slots.assign(cap, 0);
    m.mask = cap - 1;
    m.count = 0;
    for (uint64_t v : old)
      if (v) bytes_insert(static_cast<int32_t>(static_cast<uint32_t>(v) - 1));
  }
  const std::string_view s = id_bytes_[id];
  const uint64_t h = hash_bytes(s);
  const uint64_t packed = ((h >> 32) << 32) | static_cast<uint32_t>(id + 1);
  for (size_t i = h & m.mask;; i = (i + 1) & m.mask) {
    const uint64_t v = m.slots[i];
    if (v == 0) {
      m.slots[i] = packed;
      ++m.count;
      return;
    }
    if (id_bytes_[static_cast<uint32_t>(v) - 1] ==
        s) {  // same bytes registered again: the later id wins
      m.slots[i] = packed;
      return;
    }
  }
}

void BpeModel::add_token(int32_t id, std::string bytes) {
  if (static_cast<size_t>(id) >= id_bytes_.size()) {
    id_bytes_.resize(id + 1);
    has_id_.resize(id + 1, 0);
  }
  if (!has_id_[id]) ++n_tokens_;
  has_id_[id] = 1;
  id_bytes_[id] = std::move(bytes);
  bytes_insert(id);
}

void BpeModel::add_merge(int32_t a, int32_t b, int32_t merged, uint32_t rank) {
  pairs_.insert(key(a, b), Merge{rank, merged});
  ++n_merges_;
}

void BpeModel::derive_merges_from_ranks() {
  pairs_.reserve(n_tokens_ * 4);
  for (size_t id = 0; id < id_bytes_.size(); ++id) {
    if (!has_id_[id]) continue;
    const std::string_view t = id_bytes_[id];
    for (size_t k = 1; k < t.size(); ++k) {
      const int32_t l = bytes_find(t.substr(0, k));
      if (l < 0) continue;
      const int32_t r = bytes_find(t.substr(k));
      if (r < 0) continue;
      add_merge(l, r, static_cast<int32_t>(id), static_cast<uint32_t>(id));
    }
  }
}

void BpeModel::finalize() {
  for (int b = 0; b < 256; ++b) {
    const char c = static_cast<char>(b);
    byte_id_[b] = bytes_find(std::string_view(&c, 1));
  }
}

std::optional<int32_t> BpeModel::find(std::string_view bytes) const {
  const int32_t id = bytes_find(bytes);
  if (id < 0) return std::nullopt;
  return id;
}

const std::string* BpeModel::bytes_of(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_bytes_.size() || !has_id_[id]) return nullptr;
  return &id_bytes_[id];
}

void BpeModel::merge_small(std::vector<int32_t>& syms) const {
  // Symbols stay in a compact array; each step finds the lowest-ranked adjacent pair and merges it.
  const size_t n = syms.size();
  uint32_t ranks[kSmallWord];
  int32_t merged[kSmallWord];
  size_t len = n;
  for (size_t i = 0; i + 1 < len; ++i) {
    const Merge* m = lookup(syms[i], syms[i + 1]);
    ranks[i] = m ? m->rank : kNoRank;
    merged[i] = m ? m->merged : -1;
  }
  while (len > 1) {
    uint32_t best = kNoRank;
    size_t bi = 0;
    for (size_t i = 0; i + 1 < len; ++i)
      if (ranks[i] < best) best = ranks[i], bi = i;
    if (best == kNoRank) break;
    syms[bi] = merged[bi];
    for (size_t i = bi + 1; i + 1 < len; ++i) {
      syms[i] = syms[i + 1];
      ranks[i] = ranks[i + 1];
      merged[i] = merged[i + 1];
    }
    --len;
    auto refresh = [&](size_t i) {
      const Merge* m = lookup(syms[i], syms[i + 1]);
      ranks[i] = m ? m->rank : kNoRank;
      merged[i] = m ? m->merged : -1;
    };
    if (bi > 0) refresh(bi - 1);
    if (bi + 1 < len) refresh(bi);
  }
  syms.resize(len);
}

void BpeModel::merge_large(std::vector<int32_t>& syms) const {
  // Linked list plus a min-heap of (rank, position); stale entries are skipped when popped.
  const int n = static_cast<int>(syms.size());
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1;
  struct Cand {
    uint32_t rank;
    int pos;
    int32_t left, right, merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int i) {
    if (i < 0 || next[i] < 0) return;
    if (const Merge* m = lookup(syms[i], syms[next[i]]))
      heap.push({m->rank, i, syms[i], syms[next[i]], m->merged});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const int j = next[c.pos];
    if (syms[c.pos] != c.left || j < 0 || syms[j] != c.right) continue;
    syms[c.pos] = c.merged;
    syms[j] = -1;
    next[c.pos] = next[j];
    if (next[j] >= 0) prev[next[j]] = c.pos;
    push(prev[c.pos]);
    push(c.pos);
  }
  size_t w = 0;
  for (int i = 0; i >= 0 && i < n; i = next[i]) syms[w++] = syms[i];
  syms.resize(w);
}

void BpeModel::encode_piece(std::string_view bytes, std::vector<int32_t>& out) const {
  if (bytes.empty()) return;
  if (bytes.size() == 1) {
    const int32_t id = byte_id_[static_cast<unsigned char>(bytes[0])];
    if (id >= 0)
      out.push_back(id);
    else if (unk_)
      out.push_back(*unk_);
    return;
  }
  const bool cacheable = cache_enabled_ && bytes.size() <= kCacheKey;
  uint64_t h = 0;
  CacheEntry* slot = nullptr;
  if (cacheable) {
    h = hash_bytes(bytes);
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_.empty()) cache_.resize(kCacheSlots);
    slot = &cache_[h & (kCacheSlots - 1)];
    if (slot->key_len == bytes.size() && slot->tag == static_cast<uint32_t>(h >> 32) &&
        std::memcmp(slot->key, bytes.data(), bytes.size()) == 0) {
      out.insert(out.end(), slot->ids, slot->ids + slot->n_ids);
      return;
    }
  }
  const size_t start = out.size();
  std::optional<int32_t> whole;
  if (ignore_merges_) {
    const int32_t id = bytes_find(bytes);
    if (id >= 0) whole = id;
  }
  if (whole) {
    out.push_back(*whole);
  } else {
    std::vector<int32_t> syms;
    syms.reserve(bytes.size());
    for (unsigned char b : bytes) {
      const int32_t id = byte_id_[b];
      // HF drops a byte that has no token unless an unk token is set.
      if (id >= 0)
        syms.push_back(id);
      else if (unk_)
        syms.push_back(*unk_);
    }
    if (syms.size() <= kSmallWord)
      merge_small(syms);
    else
      merge_large(syms);
    out.insert(out.end(), syms.begin(), syms.end());
  }
  const size_t n = out.size() - start;
  if (cacheable && n <= kCacheIds) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    slot->tag = static_cast<uint32_t>(h >> 32);
    slot->key_len = static_cast<uint8_t>(bytes.size());
    slot->n_ids = static_cast<uint8_t>(n);
    std::memcpy(slot->key, bytes.data(), bytes.size());
    std::memcpy(slot->ids, out.data() + start, n * sizeof(int32_t));
  }
}

}  // namespace dllmq
