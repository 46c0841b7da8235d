#include "cache/fp16_channels.h"

#include <algorithm>

#include "util/error.h"

namespace dllmq {

void normalize_fp16_channels(Fp16Channels& ch, KvGeometry geo) {
  if (int(ch.size()) != geo.n_layers)
    fail("dllm-kvq: fp16 channel lists for {} layers, the model has {}", ch.size(), geo.n_layers);
  for (auto& per_layer : ch) {
    if (int(per_layer.size()) != geo.n_kv_heads)
      fail("dllm-kvq: fp16 channel lists for {} KV heads, the model has {}", per_layer.size(),
           geo.n_kv_heads);
    for (auto& list : per_layer) {
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
      for (int c : list)
        if (c < 0 || c >= geo.head_dim)
          fail("dllm-kvq: channel {} outside [0, {})", c, geo.head_dim);
    }
  }
}

size_t count_fp16_channels(const Fp16Channels& ch) {
  size_t n = 0;
  for (const auto& l : ch)
    for (const auto& h : l) n += h.size();
  return n;
}

}  // namespace dllmq
