#include "ops/gemm_peak.h"

#include <random>
#include <vector>

#include "util/best_time.h"
#include "util/half.h"

namespace dllmq {

double measure_linear_gflops(int m, int n, int k, DType wdtype, ComputeDType dt, double min_s) {
  std::mt19937 g(7);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<float> x(size_t(m) * k), y(size_t(m) * n);
  for (float& v : x) v = nd(g);
  const size_t nw = size_t(n) * k;
  std::vector<float> wf;
  std::vector<uint16_t> wh;
  TensorView tv;
  tv.dtype = wdtype;
  tv.shape = {n, k};
  if (wdtype == DType::kF32) {
    wf.resize(nw);
    for (float& v : wf) v = nd(g);
    tv.data = wf.data();
  } else {
    wh.resize(nw);
    for (uint16_t& v : wh) v = wdtype == DType::kBF16 ? f32_to_bf16(nd(g)) : f32_to_f16(nd(g));
    tv.data = wh.data();
  }
  tv.nbytes = nw * dtype_size(wdtype);
  Linear l{&tv, nullptr, n, k};
  pack_linear(l, dt);  // as a loaded model's weights are (AMX tiles in bf16 compute where chosen)
  const double s = best_time([&] { linear(x.data(), m, l, y.data(), 0, dt); }, min_s);
  return 2.0 * m * n * k / s * 1e-9;
}

double measure_read_gbps(size_t bytes, double min_s) {
  constexpr size_t kLanes = 32;  // independent partial sums: 4 AVX2 / 2 AVX-512 accumulators
  const size_t n = bytes / sizeof(float) / kLanes * kLanes;
  std::vector<float> buf(n, 1.0f);
  volatile float sink = 0.0f;
  const double s = best_time(
      [&] {
        float total = 0.0f;
#pragma omp parallel reduction(+ : total)
        {
          float part[kLanes] = {};
#pragma omp for schedule(static)
          for (size_t i = 0; i < n; i += kLanes)
            for (size_t j = 0; j < kLanes; ++j) part[j] += buf[i + j];
          for (float p : part) total += p;
        }
        sink = total;
      },
      min_s);
  (void)sink;
  return double(n) * sizeof(float) / s * 1e-9;
}

}  // namespace dllmq
