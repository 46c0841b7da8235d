#include "calib/state_dump.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/error.h"

namespace dllmq {

namespace {

template <typename T>
std::string list(std::span<const T> v) {
  return fmt::format("[{}]", fmt::join(v, ","));
}

std::string range(PosRange r) {
  return fmt::format("[{},{}]", r.begin, r.end);
}

// Rows of `dim` floats as a JSON list of lists.
std::string matrix(const float* x, size_t rows, int dim) {
  std::string s = "[";
  for (size_t r = 0; r < rows; ++r) {
    s += r ? ",[" : "[";
    for (int c = 0; c < dim; ++c) {
      if (c) s += ',';
      s += fmt::format("{:.9g}", x[r * dim + c]);
    }
    s += ']';
  }
  return s + "]";
}

}  // namespace

StateDump::StateDump(const std::string& path)
    : file_(std::make_unique<AtomicFile>(path)), f_(file_->stream()) {}

StateDump::~StateDump() = default;  // an uncommitted AtomicFile removes its temporary

void StateDump::pair(int index, const std::string& trajectory, std::span<const int32_t> prompt,
                     int canvas_len, std::span<const int32_t> target) {
  pair_ = index;
  forward_ = -1;
  fmt::print(f_,
             "{{\"kind\":\"pair\",\"pair\":{},\"trajectory\":\"{}\",\"prompt\":{},"
             "\"canvas_length\":{},\"target\":{}}}\n",
             index, trajectory, list(prompt), canvas_len, list(target));
}

void StateDump::forward(const ForwardArgs& a) {
  ++forward_;
  std::string cached = "[";
  for (size_t i = 0; i < a.cached.size(); ++i) {
    if (i) cached += ',';  // appended piecewise: `"," + std::string` trips GCC 12 (PR 105651)
    cached += range(a.cached[i]);
  }
  fmt::print(f_,
             "{{\"kind\":\"forward\",\"pair\":{},\"forward\":{},\"pos0\":{},\"ids\":{},"
             "\"active\":{},\"cached\":{}],\"write\":{},\"logits\":{}}}\n",
             pair_, forward_, a.pos0, list(a.ids), range(a.active), cached, range(a.write),
             range(a.logits));
}

void StateDump::rows(int layer, const std::vector<int>& pos, const std::vector<int>& region,
                     const std::vector<int>& fresh, const std::vector<float>& k,
                     const std::vector<float>& v, int kv_dim) {
  fmt::print(f_,
             "{{\"kind\":\"rows\",\"pair\":{},\"forward\":{},\"layer\":{},\"pos\":{},"
             "\"region\":{},\"fresh\":{},\"k\":{},\"v\":{}}}\n",
             pair_, forward_, layer, list(std::span<const int>(pos)),
             list(std::span<const int>(region)), list(std::span<const int>(fresh)),
             matrix(k.data(), pos.size(), kv_dim), matrix(v.data(), pos.size(), kv_dim));
}

void StateDump::queries(int layer, int pos0, int n, const float* q, int q_dim) {
  std::vector<int> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = pos0 + i;
  fmt::print(f_,
             "{{\"kind\":\"queries\",\"pair\":{},\"forward\":{},\"layer\":{},\"pos\":{},\"q\":{}}}"
             "\n",
             pair_, forward_, layer, list(std::span<const int>(pos)), matrix(q, size_t(n), q_dim));
}

void StateDump::step(int step, int block, std::span<const int32_t> revealed,
                     std::span<const int32_t> canvas) {
  fmt::print(f_,
             "{{\"kind\":\"step\",\"pair\":{},\"step\":{},\"block\":{},\"revealed\":{},"
             "\"canvas\":{}}}\n",
             pair_, step, block, list(revealed), list(canvas));
}

void StateDump::fisher(bool current_forward, std::span<const int32_t> ids, int pos0,
                       const std::vector<PosRange>& cached, std::span<const LossTerm> terms,
                       double value) {
  std::string c = "[", l = "[";
  for (size_t i = 0; i < cached.size(); ++i) {
    if (i) c += ',';
    c += range(cached[i]);
  }
  for (size_t i = 0; i < terms.size(); ++i)
    l += fmt::format("{}[{},{},{:.17g}]", i ? "," : "", terms[i].row, terms[i].target,
                     terms[i].weight);
  fmt::print(f_,
             "{{\"kind\":\"fisher\",\"pair\":{},\"forward\":{},\"pos0\":{},\"ids\":{},"
             "\"cached\":{}],\"loss\":{}],\"value\":{:.17g}}}\n",
             pair_, current_forward ? forward_ : -1, pos0, list(ids), c, l, value);
}

void StateDump::grads(bool current_forward, const LayerKvGrad& g) {
  fmt::print(f_,
             "{{\"kind\":\"grads\",\"pair\":{},\"forward\":{},\"layer\":{},\"pos\":{},"
             "\"gk\":{},\"gv\":{}}}\n",
             pair_, current_forward ? forward_ : -1, g.layer, list(g.pos),
             matrix(g.gk, g.pos.size(), g.kv_dim), matrix(g.gv, g.pos.size(), g.kv_dim));
}

void StateDump::close() {
  if (!f_) return;
  f_ = nullptr;
  try {
    file_->commit();
  } catch (const Error& e) {
    fail("--dump-states {}", e.what());
  }
}

}  // namespace dllmq
