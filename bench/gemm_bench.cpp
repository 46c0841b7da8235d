// The GEMM backends side by side at the engine's shapes (src/ops/gemm.h): one thread per call,
// as the engine calls them inside its own parallel regions. Arguments: lib (0 oneDNN,
// 1 OpenBLAS), m, n, k; B is [n, k] (x W^T) except the attention P V product (trans 0).
//   build/bench/gemm_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>

#include <vector>

#include "ops/gemm.h"

namespace {

void BM_Sgemm(benchmark::State& st) {
  const auto lib = st.range(0) == 0 ? dllmq::GemmLib::kOneDnn : dllmq::GemmLib::kOpenBlas;
  if (!dllmq::gemm_available(lib)) {
    st.SkipWithError("library not compiled in");
    return;
  }
  dllmq::gemm_select(lib);
  const int m = int(st.range(1)), n = int(st.range(2)), k = int(st.range(3));
  const bool tb = st.range(4) != 0;
  std::vector<float> a(size_t(m) * k, 0.5f), b(size_t(n) * k, 0.25f), c(size_t(m) * n);
  for (auto _ : st)
    dllmq::sgemm(tb, m, n, k, 1.0f, a.data(), k, b.data(), tb ? k : n, 0.0f, c.data(), n);
  st.SetLabel(dllmq::gemm_info().name + " " + dllmq::gemm_info().isa);
  st.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * n * k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
void Shapes(benchmark::internal::Benchmark* b) {
  for (int lib : {0, 1}) {
    b->Args({lib, 32, 256, 1024, 1});   // a projection panel, dual-cache step
    b->Args({lib, 512, 256, 1024, 1});  // the same panel, full forward
    b->Args({lib, 32, 80, 2816, 1});    // a down-projection panel
    b->Args({lib, 32, 256, 128, 1});    // attention scores, one head, 256 keys
    b->Args({lib, 32, 128, 256, 0});    // attention P V
    b->Args({lib, 512, 1024, 1024, 1});
  }
}
BENCHMARK(BM_Sgemm)->Apply(Shapes)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
