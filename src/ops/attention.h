// Bidirectional (non-causal) multi-head attention over keys that come from several sources:
// rows computed in this forward and rows held in a KV store. Sources hand out f32 rows one KV
// head at a time, so a quantized store dequantizes per head inside the kernel instead of
// materialising a dequantized copy of the whole cache.
#pragma once

#include <span>

namespace dllmq {

// Rows of one KV head: K (post-RoPE) and V, `n` rows each with row stride `ld` floats.
struct KvRows {
  const float* k = nullptr;
  const float* v = nullptr;
  int ld = 0;
  int n = 0;
};

class KvRowSource {
 public:
  virtual ~KvRowSource() = default;
  virtual int n_rows() const = 0;
  // May return pointers into the source itself or into the scratch buffers ([n_rows, hd] each).
  virtual KvRows rows(int kv_head, float* k_scratch, float* v_scratch) const = 0;
};

// Rows computed in the current forward: k, v are [n, n_kv_heads * hd] f32.
class FreshKvRows final : public KvRowSource {
 public:
  FreshKvRows(const float* k, const float* v, int n, int kv_dim, int hd)
      : k_(k), v_(v), n_(n), kv_dim_(kv_dim), hd_(hd) {}
  int n_rows() const override { return n_; }
  KvRows rows(int g, float*, float*) const override {
    return {k_ + size_t(g) * hd_, v_ + size_t(g) * hd_, kv_dim_, n_};
  }

 private:
  const float* k_;
  const float* v_;
  int n_, kv_dim_, hd_;
};

// q: [nq, n_heads * hd] post-RoPE; out: [nq, n_heads * hd]. Scale 1/sqrt(hd), no mask.
// Query head h reads KV head h / (n_heads / n_kv_heads) (grouped-query attention).
void attention(const float* q, int nq, int n_heads, int n_kv_heads, int hd,
               std::span<const KvRowSource* const> sources, float* out);

// Scalar reference (double accumulation) for tests.
void attention_ref(const float* q, int nq, int n_heads, int n_kv_heads, int hd,
                   std::span<const KvRowSource* const> sources, float* out);

}  // namespace dllmq
