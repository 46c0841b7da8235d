// KV store interface. Positions in a dLLM canvas never move, so a store works on position
// ranges per layer: the block-start refresh writes rows, cached forwards read them back as f32
// rows one KV head at a time. The store receives pre-RoPE K and decides where RoPE is applied
// (dense and KIVI stores rotate before storing; KVQuant-style stores after dequantizing).
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "ops/attention.h"

namespace dllmq {

struct PosRange {
  int begin = 0;
  int end = 0;
  int size() const { return end - begin; }
  bool empty() const { return end <= begin; }
};

struct KvGeometry {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int kv_dim() const { return n_kv_heads * head_dim; }
};

// Bytes a store holds for the rows written since reset, K and V apart, everything counted:
// codes, scales, zeros, outliers and their indices, full-precision rows and channels.
struct KvBytes {
  size_t k = 0;
  size_t v = 0;
  size_t total() const { return k + v; }
};

class KvStore {
 public:
  virtual ~KvStore() = default;

  // Starts a new canvas of `n_positions` rows; drops everything held.
  virtual void reset(int n_positions) = 0;
  // k_pre, v: [n, kv_dim] f32 rows for positions [p0, p0 + n) of `layer`. Non-finite values are
  // an error naming the layer and position (never stored silently).
  virtual void write(int layer, int p0, int n, const float* k_pre, const float* v) = 0;
  // Rows [p0, p0 + n) of (layer, kv_head): K post-RoPE and V as f32. Thread-safe for
  // concurrent reads (attention calls it from several threads).
  virtual KvRows read(int layer, int kv_head, int p0, int n, float* k_scratch,
                      float* v_scratch) const = 0;
  // The same rows as bf16 where the store holds them so (see KvRowSource::rows_bf16).
  virtual KvRowsBf16 read_bf16(int layer, int kv_head, int p0, int n) const {
    (void)layer, (void)kv_head, (void)p0, (void)n;
    return {};
  }
  // Largest number of rows read() should be asked for at once (see KvRowSource::max_tile).
  virtual int max_tile() const { return KvRowSource::kDequantTile; }
  virtual KvBytes held() const = 0;
  size_t bytes() const { return held().total(); }
  // The rows written since reset at fp16 (K and V): the baseline of every comparison.
  virtual size_t bytes_fp16() const = 0;
  // Short method name for reports: fp32, fp16, bf16, kivi, kvquant, dllm-kvq.
  virtual std::string method() const = 0;
  // Nominal bits per K / V code (dense stores: their dtype's width).
  virtual int bits_k() const = 0;
  virtual int bits_v() const = 0;
  // Descriptive name with parameters (e.g. "kivi-k2v2-g32").
  virtual std::string name() const = 0;
};

// A KvRowSource over rows [p0, p0 + n) of one layer of a store.
class StoredKvRows final : public KvRowSource {
 public:
  StoredKvRows(const KvStore& s, int layer, PosRange r) : s_(s), layer_(layer), r_(r) {}
  int n_rows() const override { return r_.size(); }
  int max_tile() const override { return s_.max_tile(); }
  KvRows rows(int g, int r0, int n, float* ks, float* vs) const override {
    return s_.read(layer_, g, r_.begin + r0, n, ks, vs);
  }
  KvRowsBf16 rows_bf16(int g, int r0, int n) const override {
    return s_.read_bf16(layer_, g, r_.begin + r0, n);
  }

 private:
  const KvStore& s_;
  int layer_;
  PosRange r_;
};

}  // namespace dllmq
