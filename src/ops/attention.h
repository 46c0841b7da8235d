// Bidirectional (non-causal) multi-head attention over keys that come from several sources:
// rows computed in this forward and rows held in a KV store. The kernel walks every source
// tile by tile (flash-style online softmax joining all sources), and a source hands out one
// tile of f32 rows of one KV head at a time: a quantized store dequantizes that tile into a
// small per-thread buffer, so no dequantized copy of a layer's cache is ever made.
#pragma once

#include <cstdint>
#include <span>

namespace dllmq {

// Rows of one KV head: K (post-RoPE) and V, `n` rows each with row stride `ld` floats.
struct KvRows {
  const float* k = nullptr;
  const float* v = nullptr;
  int ld = 0;
  int n = 0;
};

// Rows of one KV head held as bf16 (a bf16 store's own bytes): K (post-RoPE) and V, row stride
// `ld` values. Empty (k == nullptr) where a source holds anything else.
struct KvRowsBf16 {
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  int ld = 0;
};

class KvRowSource {
 public:
  virtual ~KvRowSource() = default;
  virtual int n_rows() const = 0;
  // Largest tile the source hands out at once: sources that return pointers into themselves
  // take large tiles, dequantizing ones a tile that fits the per-thread scratch in L2.
  virtual int max_tile() const { return kDequantTile; }
  // Rows [r0, r0 + n) of one KV head (n <= max_tile()). May return pointers into the source
  // itself or into the scratch buffers ([n, hd] each).
  virtual KvRows rows(int kv_head, int r0, int n, float* k_scratch, float* v_scratch) const = 0;
  // The same rows as the bf16 values the source holds, where it holds them so: pointers into it
  // (bf16 attention on AMX tiles packs them without widening them to f32 first; widening is
  // exact, so the result is the same). Empty by default.
  virtual KvRowsBf16 rows_bf16(int kv_head, int r0, int n) const {
    (void)kv_head, (void)r0, (void)n;
    return {};
  }

  static constexpr int kDequantTile = 128;
  static constexpr int kPointerTile = 512;
};

// Rows held as f32 arrays, k, v: [n, n_kv_heads * hd] (the rows computed in the current forward,
// or a copy of stored rows). `tile` is the largest tile handed out: a copy standing in for a
// store uses the store's, so attention walks the same tiles and gives bit-identical output.
class FreshKvRows final : public KvRowSource {
 public:
  FreshKvRows(const float* k, const float* v, int n, int kv_dim, int hd, int tile = kPointerTile)
      : k_(k), v_(v), n_(n), kv_dim_(kv_dim), hd_(hd), tile_(tile) {}
  int n_rows() const override { return n_; }
  int max_tile() const override { return tile_; }
  KvRows rows(int g, int r0, int n, float*, float*) const override {
    const size_t off = size_t(r0) * kv_dim_ + size_t(g) * hd_;
    return {k_ + off, v_ + off, kv_dim_, n};
  }

 private:
  const float* k_;
  const float* v_;
  int n_, kv_dim_, hd_, tile_;
};

// q: [nq, n_heads * hd] post-RoPE; out: [nq, n_heads * hd]. Scale 1/sqrt(hd), no mask.
// Query head h reads KV head h / (n_heads / n_kv_heads) (grouped-query attention). Products in
// f32; with `bf16` (bf16 compute) on AMX tiles where bf16 compute's products run on them
// (ops/attention_amx.h: operands rounded to bf16), else in f32 as well.
void attention(const float* q, int nq, int n_heads, int n_kv_heads, int hd,
               std::span<const KvRowSource* const> sources, float* out, bool bf16 = false);

// Scalar reference (double accumulation) for tests.
void attention_ref(const float* q, int nq, int n_heads, int n_kv_heads, int hd,
                   std::span<const KvRowSource* const> sources, float* out);

}  // namespace dllmq
