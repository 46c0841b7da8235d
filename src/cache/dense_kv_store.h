// Dense KV store: rows held at f32, f16 or bf16, K rotated once on write (post-RoPE).
// Layout [layer][kv_head][pos][hd] so a block overwrite is a contiguous range per head.
#pragma once

#include <memory>
#include <vector>

#include "cache/kv_store.h"
#include "io/dtype.h"
#include "ops/rope.h"

namespace dllmq {

class DenseKvStore final : public KvStore {
 public:
  DenseKvStore(KvGeometry geo, DType dtype, const RopeTable& rope);

  void reset(int n_positions) override;
  void write(int layer, int p0, int n, const float* k_pre, const float* v) override;
  KvRows read(int layer, int kv_head, int p0, int n, float* k_scratch,
              float* v_scratch) const override;
  KvRowsBf16 read_bf16(int layer, int kv_head, int p0, int n) const override;
  int max_tile() const override;
  KvBytes held() const override;
  size_t bytes_fp16() const override;
  std::string method() const override;
  int bits_k() const override { return int(dtype_size(dtype_)) * 8; }
  int bits_v() const override { return int(dtype_size(dtype_)) * 8; }
  std::string name() const override { return "dense-" + method(); }

 private:
  size_t offset(int layer, int g, int pos) const {
    return ((size_t(layer) * geo_.n_kv_heads + g) * capacity_ + pos) * geo_.head_dim;
  }
  void store_row(uint8_t* dst, size_t off, const float* src);

  KvGeometry geo_;
  DType dtype_;
  const RopeTable& rope_;
  int capacity_ = 0;
  std::unique_ptr<uint8_t[]> k_,
      v_;  // raw storage in dtype_, default-initialised (untouched pages cost nothing)
  std::vector<uint8_t> held_;  // per position: written since reset (layer 0 decides)
  size_t rows_held_ = 0;
};

}  // namespace dllmq
