// KIVI store (METHODS.md §1), also the storage of dLLM-KVQ (§4):
//   K post-RoPE, per channel over groups of G consecutive absolute positions (fp16 scale and
//   zero per (group, channel)); V per token over groups of Gv = min(G, hd) channels.
//   A write quantizes every K group it covers completely; rows of a group it covers only in
//   part (the trailing partial group of a prefix or of the canvas) are kept at full precision
//   (f32, the compute precision), like KIVI's residual. Rows outside the written range are
//   never touched, so they stay bit-identical.
//   dLLM-KVQ: a set of K channels (per layer and KV head) is kept as fp16 values beside the
//   low-bit rest; their slots in the packed rows carry code 0 with scale 0.
#pragma once

#include <memory>
#include <vector>

#include "cache/kv_store.h"
#include "ops/rope.h"

namespace dllmq {

struct KiviConfig {
  int bits_k = 2;
  int bits_v = 2;
  int group = 32;
  // dLLM-KVQ: fp16 K channels, [layer][kv_head] -> sorted channel indices (empty: plain KIVI).
  std::vector<std::vector<std::vector<int>>> fp16_channels;
};

class KiviKvStore final : public KvStore {
 public:
  KiviKvStore(KvGeometry geo, KiviConfig cfg, const RopeTable& rope);

  void reset(int n_positions) override;
  void write(int layer, int p0, int n, const float* k_pre, const float* v) override;
  KvRows read(int layer, int kv_head, int p0, int n, float* k_scratch,
              float* v_scratch) const override;
  KvBytes held() const override;
  size_t bytes_fp16() const override;
  std::string method() const override { return dllm_kvq_ ? "dllm-kvq" : "kivi"; }
  std::string name() const override;
  int bits_k() const override { return cfg_.bits_k; }
  int bits_v() const override { return cfg_.bits_v; }

 private:
  size_t lh(int layer, int g) const { return size_t(layer) * geo_.n_kv_heads + g; }
  void write_k_head(int layer, int g, int p0, int n, const float* rot);
  void write_v_head(int layer, int g, int p0, int n, const float* v);
  void update_counts(int layer);

  KvGeometry geo_;
  KiviConfig cfg_;
  const RopeTable& rope_;
  bool dllm_kvq_ = false;
  int gv_ = 0;              // V channel group
  size_t kb_ = 0, vb_ = 0;  // packed bytes per K / V row
  int cap_ = 0, n_groups_ = 0;
  // Raw arrays, default-initialised: pages of rows never written cost no memory.
  std::unique_ptr<uint8_t[]> k_codes_;            // [layer][head][pos][kb_]
  std::unique_ptr<uint16_t[]> k_params_;          // [layer][head][group][2][hd] fp16 scale, zero
  std::unique_ptr<uint8_t[]> v_codes_;            // [layer][head][pos][vb_]
  std::unique_ptr<uint16_t[]> v_params_;          // [layer][head][pos][2][hd / gv] fp16 scale, zero
  std::vector<std::unique_ptr<float[]>> k_full_;  // [layer][head][group] -> [G, hd] f32
  std::vector<std::vector<uint16_t>> hp_vals_;    // [layer][head] -> [pos][n_channels] fp16
  std::vector<uint8_t> written_, full_;           // [layer][pos]
  struct Counts {
    size_t rows = 0, full_rows = 0, quant_groups = 0;
  };
  std::vector<Counts> counts_;  // per layer
};

}  // namespace dllmq
