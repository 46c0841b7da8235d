// `dllmq calibrate --dump-states FILE`: every state a calibration observed, as JSONL, so tests
// (and people) can hold them against an independent reference (tools/ref_forward.py). One object
// per line, in the order observed; "kind" says which:
//   pair     {pair, trajectory, prompt, canvas_length, target} (target: the reference ids of the
//            generated part; for kvquant ar, the answer as given)
//   forward  {pair, forward, pos0, ids (the rows computed), active, cached, write, logits}
//            (ranges as [begin, end))
//   rows     {pair, forward, layer, pos, region, fresh, k, v}: the K (pre-RoPE) and V rows the
//            forward read, cached rows as the store held them (fresh = 0) and computed rows
//            (fresh = 1); region 0 prompt, 1 decoded prefix, 2 active block, 3 masked suffix
//   queries  {pair, forward, layer, pos, q}: the active block's queries (post-RoPE, all heads)
//   step     {pair, step, block, revealed, canvas}: a reveal step (TRACE / random) and the
//            canvas after it
//   fisher   {pair, forward, pos0, ids, cached, loss, value}: the masked-diffusion loss whose
//            gradients follow (Fisher weights): loss = [[row, target, weight], ...] over raw
//            logits rows, value = the loss. forward = the forward it scores, or -1 for the
//            `ar` masked copy (then ids is that copy's whole canvas and nothing is cached)
//   grads    {pair, forward, layer, pos, gk, gv}: d loss / d K (pre-RoPE) and d V of every row
//            that forward read, in the order of its rows line (written before its fisher line)
// Floats are written with 9 significant digits (float32 round trip). Meant for tiny models: a
// pair of an 8B model would be gigabytes. Written to a temporary, fsynced and renamed at close()
// (util/atomic_file.h).
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/kv_grad.h"
#include "model/model.h"
#include "util/atomic_file.h"

namespace dllmq {

class StateDump {
 public:
  explicit StateDump(const std::string& path);
  ~StateDump();  // without close(): the temporary is removed
  StateDump(const StateDump&) = delete;
  StateDump& operator=(const StateDump&) = delete;

  void pair(int index, const std::string& trajectory, std::span<const int32_t> prompt,
            int canvas_len, std::span<const int32_t> target);
  void forward(const ForwardArgs& a);  // numbers the forwards of the current pair
  void rows(int layer, const std::vector<int>& pos, const std::vector<int>& region,
            const std::vector<int>& fresh, const std::vector<float>& k, const std::vector<float>& v,
            int kv_dim);
  void queries(int layer, int pos0, int n, const float* q, int q_dim);
  void step(int step, int block, std::span<const int32_t> revealed,
            std::span<const int32_t> canvas);
  // current_forward: the forward just dumped; false: the ar masked copy (forward -1).
  void fisher(bool current_forward, std::span<const int32_t> ids, int pos0,
              const std::vector<PosRange>& cached, std::span<const LossTerm> terms, double value);
  void grads(bool current_forward, const LayerKvGrad& g);
  void close();

 private:
  std::unique_ptr<AtomicFile> file_;  // temporary, fsynced and renamed at close()
  std::FILE* f_ = nullptr;
  int pair_ = -1, forward_ = -1;
};

}  // namespace dllmq
