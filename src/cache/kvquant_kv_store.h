// KVQuant store (METHODS.md §2): K pre-RoPE per channel with offline (calibrated) outlier
// thresholds and a per-layer non-uniform codebook; V per token with online thresholds and its
// own per-layer codebook; outliers kept sparsely at fp16 (CSR per layer and KV head: a 16-bit
// channel index and an fp16 value per outlier, a 32-bit row start per row); the first `sink`
// positions (attention sink) kept at fp16. RoPE is applied to K after dequantization, tile by
// tile, at each row's absolute position.
#pragma once

#include <memory>
#include <vector>

#include "cache/fp16_channels.h"
#include "cache/kv_store.h"
#include "io/calib_artifact.h"
#include "ops/rope.h"
#include "quant/outliers.h"

namespace dllmq {

class KvQuantKvStore final : public KvStore {
 public:
  // The artifact must already be checked against the model (check_calib_matches).
  // fp16_channels: [layer][kv_head] -> channel indices kept at fp16 (empty: plain KVQuant).
  KvQuantKvStore(KvGeometry geo, const CalibArtifact& calib, const RopeTable& rope,
                 Fp16Channels fp16_channels = {});

  void reset(int n_positions) override;
  void write(int layer, int p0, int n, const float* k_pre, const float* v) override;
  KvRows read(int layer, int kv_head, int p0, int n, float* k_scratch,
              float* v_scratch) const override;
  KvBytes held() const override;
  size_t bytes_fp16() const override;
  std::string method() const override { return dllm_kvq_ ? "dllm-kvq" : "kvquant"; }
  std::string name() const override;
  int bits_k() const override { return bits_k_; }
  int bits_v() const override { return bits_v_; }

 private:
  // Sparse fp16 outliers of one (layer, kv head): row p holds ent[start[p] .. start[p + 1]).
  struct Csr {
    std::vector<uint32_t> start;
    std::vector<SparseEntry> ent;
    void reset(int cap) {
      start.assign(size_t(cap) + 1, 0);
      ent.clear();
    }
    // Replaces rows [p0, p0 + n) by `rows` (entries of those rows in order, counts per row).
    void replace(int p0, int n, const std::vector<SparseEntry>& rows,
                 const std::vector<uint32_t>& counts);
  };
  struct LayerParams {
    std::vector<float> k_lo, k_up, k_zp, k_range;  // [kvd] f32
    std::vector<float> k_lut, v_lut;
  };
  size_t lh(int layer, int g) const { return size_t(layer) * geo_.n_kv_heads + g; }
  void write_head(int layer, int g, int p0, int n, const float* k_pre, const float* v);

  KvGeometry geo_;
  const RopeTable& rope_;
  int bits_k_, bits_v_, sink_;
  double outlier_percent_;
  std::string trajectory_, fisher_;
  std::vector<LayerParams> lp_;
  size_t kb_ = 0, vb_ = 0;
  int cap_ = 0;
  std::unique_ptr<uint8_t[]> k_codes_, v_codes_;  // [layer][head][pos][kb_ | vb_]
  std::unique_ptr<uint16_t[]> v_params_;          // [layer][head][pos][2] fp16 offset, range
  std::vector<uint16_t> sink_k_, sink_v_;         // [layer][head][sink][hd] fp16 (pre-RoPE K)
  std::vector<Csr> k_out_, v_out_;                // [layer][head]
  std::vector<uint8_t> written_;                  // [layer][pos]
  std::vector<size_t> rows_;                      // per layer
  bool dllm_kvq_ = false;
  Fp16Channels hp_;                             // [layer][head] sorted fp16 K channels
  std::vector<std::vector<uint16_t>> hp_vals_;  // [layer][head] -> [pos][n_channels] fp16
};

}  // namespace dllmq
