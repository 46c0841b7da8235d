#include "model/output_rows.h"

#include <cstring>

#include "model/model.h"
#include "util/error.h"

namespace dllmq {

int output_row_count(const ForwardArgs& a) {
  if (a.observer != nullptr || a.logits.empty()) return static_cast<int>(a.ids.size());
  return a.n_logit_rows();
}

OutputRows select_output_rows(std::span<const CanvasForward> canvases, std::span<const int> row0) {
  OutputRows out;
  out.row0.resize(canvases.size());
  out.count.resize(canvases.size());
  for (size_t c = 0; c < canvases.size(); ++c) {
    const ForwardArgs& a = *canvases[c].args;
    const std::vector<int>& lr = a.logit_rows;
    for (size_t i = 0; i < lr.size(); ++i)
      if (lr[i] < 0 || lr[i] >= a.logits.size() || (i > 0 && lr[i] <= lr[i - 1]))
        fail("forward: logit_rows must ascend inside [0, {}) (row {} is {})", a.logits.size(), i,
             lr[i]);
    out.row0[c] = out.total();
    out.count[c] = output_row_count(a);
    auto add = [&](int offset) {  // offset: a row of the canvas's fresh rows
      out.src.push_back(row0[c] + offset);
    };
    if (out.count[c] == static_cast<int>(a.ids.size())) {
      for (int i = 0; i < out.count[c]; ++i) add(i);
    } else if (lr.empty()) {
      for (int p = a.logits.begin; p < a.logits.end; ++p) add(p - a.pos0);
    } else {
      for (int r : lr) add(a.logits.begin - a.pos0 + r);
    }
  }
  return out;
}

void gather_rows(const float* src, int ld, std::span<const int> rows, float* dst) {
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(dst + i * ld, src + size_t(rows[i]) * ld, sizeof(float) * ld);
}

void scatter_rows(const float* src, int ld, std::span<const int> rows, float* dst) {
  for (size_t i = 0; i < rows.size(); ++i)
    std::memcpy(dst + size_t(rows[i]) * ld, src + i * ld, sizeof(float) * ld);
}

}  // namespace dllmq
