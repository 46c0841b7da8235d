#include "ops/gemm_peak.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <new>
#include <random>
#include <vector>

#include "ops/int8_act_gemm.h"
#include "ops/packed_gemm.h"
#include "ops/packed_kernel.h"
#include "util/best_time.h"
#include "util/cpu_isa.h"
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

namespace {

// Sum of n floats at the widest vector width this process dispatches to (a 16-byte loop read
// half the DRAM bandwidth of a 32- or 64-byte one here).
float read_floats(const float* p, size_t n, Isa isa) {
  constexpr size_t kChunk = 64;  // floats: four AVX-512 vectors, eight AVX2 ones
  const size_t body = isa == Isa::kScalar ? 0 : n / kChunk * kChunk;
  float total = 0.0f;
  if (isa == Isa::kAvx512)
    total = kern::read_sum_avx512(p, body);
  else if (isa == Isa::kAvx2)
    total = kern::read_sum_avx2(p, body);
  float a[8] = {};
  size_t i = body;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) a[j] += p[i + j];
  for (; i < n; ++i) a[0] += p[i];
  for (float v : a) total += v;
  return total;
}

}  // namespace

double measure_read_gbps(std::span<const ByteRange> ranges, double min_s) {
  const Isa isa = dispatch_isa();
  size_t bytes = 0;
  for (const ByteRange& r : ranges) bytes += r.bytes / sizeof(float) * sizeof(float);
  if (bytes == 0) return 0.0;
  volatile float sink = 0.0f;
  const double s = best_time(
      [&] {
        float total = 0.0f;
#pragma omp parallel reduction(+ : total)
        {
          const size_t t = size_t(omp_get_thread_num()), nt = size_t(omp_get_num_threads());
          for (const ByteRange& r : ranges) {
            // Runs of 16 floats per thread (whole lines where the range is 64-byte aligned, as
            // packed weights are), the last thread taking the rest.
            const size_t n = r.bytes / sizeof(float), lines = n / 16;
            const size_t i0 = lines * t / nt * 16, i1 = t + 1 == nt ? n : lines * (t + 1) / nt * 16;
            total += read_floats(static_cast<const float*>(r.data) + i0, i1 - i0, isa);
          }
        }
        sink = total;
      },
      min_s);
  (void)sink;
  return double(bytes) / s * 1e-9;
}

double measure_read_gbps(size_t bytes, double min_s) {
  const size_t n = std::max<size_t>(bytes / sizeof(float), 16);
  float* buf = static_cast<float*>(std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64));
  if (buf == nullptr) throw std::bad_alloc();
  const std::unique_ptr<float, decltype(&std::free)> own(buf, &std::free);
  // Each thread first touches the share it reads.
#pragma omp parallel
  {
    const size_t t = size_t(omp_get_thread_num()), nt = size_t(omp_get_num_threads());
    std::fill(buf + n * t / nt, buf + n * (t + 1) / nt, 1.0f);
  }
  const ByteRange r{buf, n * sizeof(float)};
  return measure_read_gbps(std::span<const ByteRange>(&r, 1), min_s);
}

void append_weight_range(const Linear& l, std::vector<ByteRange>& out) {
  if (l.a8 != nullptr)  // --w8a8: the VNNI codes are what the products read
    out.push_back({l.a8->codes.data(), l.a8->codes.size()});
  else if (l.packed != nullptr)
    out.push_back({l.packed->data(), l.packed->bytes()});
  else if (l.w != nullptr)
    out.push_back({l.w->data, l.w->nbytes});
}

}  // namespace dllmq
