// The GEMM backends side by side at the engine's shapes (src/ops/gemm.h): one thread per call,
// as the engine calls them inside its own parallel regions (here a one-thread region, so that
// oneDNN does not start threads of its own). Arguments: lib (0 oneDNN, 1 OpenBLAS), m, n, k,
// call: 0 = sgemm with B^T (dnnl_sgemm / cblas), 1 = sgemm_nt (the projections' call: oneDNN's
// matmul primitive / cblas), 2 = sgemm with B not transposed (the attention P V product).
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
  const int call = int(st.range(4));
  const bool tb = call != 2;
  std::vector<float> a(size_t(m) * k, 0.5f), b(size_t(n) * k, 0.25f), c(size_t(m) * n);
  for (auto _ : st) {
#pragma omp parallel num_threads(1)
    {
      if (call == 1)
        dllmq::sgemm_nt(m, n, k, a.data(), k, b.data(), k, c.data(), n);
      else
        dllmq::sgemm(tb, m, n, k, 1.0f, a.data(), k, b.data(), tb ? k : n, 0.0f, c.data(), n);
    }
  }
  static const char* kCall[] = {"sgemm", "sgemm_nt", "sgemm(B)"};
  st.SetLabel(dllmq::gemm_info().name + " " + dllmq::gemm_info().isa + " " + kCall[call]);
  st.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * m * n * k * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
void Shapes(benchmark::internal::Benchmark* b) {
  for (int lib : {0, 1}) {
    for (int call : {0, 1}) {
      b->Args({lib, 32, 256, 1024, call});   // a projection panel, dual-cache step
      b->Args({lib, 512, 256, 1024, call});  // the same panel, full forward
      b->Args({lib, 32, 128, 2816, call});   // a down-projection panel
      b->Args({lib, 32, 128, 4096, call});   // an LLaDA-8B projection panel, dual-cache step
      b->Args({lib, 512, 128, 4096, call});  // the same, full forward
    }
    b->Args({lib, 32, 256, 128, 0});  // attention scores, one head, 256 keys
    b->Args({lib, 32, 128, 256, 2});  // attention P V
  }
}
BENCHMARK(BM_Sgemm)->Apply(Shapes)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
