#include "tokenizer/bpe.h"

#include <algorithm>
#include <queue>

namespace dllmq {

namespace {
constexpr uint32_t kNoRank = ~0u;
constexpr size_t kSmallWord = 40;         // linear scans beat a heap below this many symbols
constexpr size_t kMaxCachedPiece = 64;    // longer pieces are rare and not worth caching
constexpr size_t kMaxCacheIds = 1 << 22;  // cache is cleared when it grows past this
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

void BpeModel::add_token(int32_t id, std::string bytes) {
  if (static_cast<size_t>(id) >= id_bytes_.size()) {
    id_bytes_.resize(id + 1);
    has_id_.resize(id + 1, 0);
  }
  if (!has_id_[id]) ++n_tokens_;
  has_id_[id] = 1;
  by_bytes_[bytes] = id;
  id_bytes_[id] = std::move(bytes);

}

void BpeModel::add_merge(int32_t a, int32_t b, int32_t merged, uint32_t rank) {
  pairs_.insert(key(a, b), Merge{rank, merged});
  ++n_merges_;
}

void BpeModel::derive_merges_from_ranks() {
  pairs_.reserve(by_bytes_.size() * 4);
  for (size_t id = 0; id < id_bytes_.size(); ++id) {
    if (!has_id_[id]) continue;
    const std::string& t = id_bytes_[id];
    for (size_t k = 1; k < t.size(); ++k) {
      auto l = by_bytes_.find(t.substr(0, k));
      if (l == by_bytes_.end()) continue;
      auto r = by_bytes_.find(t.substr(k));
      if (r == by_bytes_.end()) continue;
      add_merge(l->second, r->second, static_cast<int32_t>(id), static_cast<uint32_t>(id));
    }
  }
}

void BpeModel::finalize() {
  for (int b = 0; b < 256; ++b) {
    auto it = by_bytes_.find(std::string(1, static_cast<char>(b)));
    byte_id_[b] = it == by_bytes_.end() ? -1 : it->second;
  }
}

std::optional<int32_t> BpeModel::find(std::string_view bytes) const {
  auto it = by_bytes_.find(std::string(bytes));
  if (it == by_bytes_.end()) return std::nullopt;
  return it->second;
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
    if (const Merge* m = lookup(syms[i], syms[next[i]])) heap.push({m->rank, i, syms[i], syms[next[i]], m->merged});
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
    if (id >= 0) out.push_back(id);
    else if (unk_) out.push_back(*unk_);
    return;
  }
  const bool cacheable = bytes.size() <= kMaxCachedPiece;
  std::string key;
  if (cacheable) {
    key.assign(bytes);
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) {
      out.insert(out.end(), cache_ids_.begin() + it->second.first,
                 cache_ids_.begin() + it->second.first + it->second.second);
      return;
    }
  }
  const size_t start = out.size();
  std::optional<int32_t> whole;
  if (ignore_merges_) {
    auto it = by_bytes_.find(cacheable ? key : std::string(bytes));
    if (it != by_bytes_.end()) whole = it->second;
  }
  if (whole) {
    out.push_back(*whole);
  } else {
    std::vector<int32_t> syms;
    syms.reserve(bytes.size());
    for (unsigned char b : bytes) {
      const int32_t id = byte_id_[b];
      // HF drops a byte that has no token unless an unk token is set.
      if (id >= 0) syms.push_back(id);
      else if (unk_) syms.push_back(*unk_);
    }
    if (syms.size() <= kSmallWord) merge_small(syms);
    else merge_large(syms);
    out.insert(out.end(), syms.begin(), syms.end());
  }
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_ids_.size() > kMaxCacheIds) {
      cache_.clear();
      cache_ids_.clear();
    }
    const uint32_t off = static_cast<uint32_t>(cache_ids_.size());
    cache_ids_.insert(cache_ids_.end(), out.begin() + start, out.end());
    cache_.emplace(std::move(key), std::make_pair(off, static_cast<uint32_t>(out.size() - start)));
  }
}

}  // namespace dllmq
