// One LLaDA-8B-shaped layer (d_model 4096, 32 heads, MLP 12288, random bf16 weights) on 32 and
// 512 tokens, next to the projections' packed kernels (BM_PackedProjection) and the GEMM
// library (BM_Gemm) at the same shapes and precision. Report the ratio
// layer GFLOP/s / GEMM GFLOP/s measured in the same run. Layer rows: /tokens/bf16-compute.
//   build/bench/forward_bench --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <fmt/format.h>
#include <vector>

#include "model/model.h"
#include "model/quantize_checkpoint.h"
#include "model/weights.h"
#include "ops/gemm.h"
#include "ops/linear.h"
#include "ops/packed_gemm.h"
#include "util/half.h"

namespace {

namespace fs = std::filesystem;
constexpr int kD = 4096, kHeads = 32, kMlp = 12288, kVocab = 256;

// Writes a one-layer LLaDA checkpoint with 8B-shaped blocks into a temp dir (once per process).
std::string make_checkpoint() {
  static std::string dir;
  if (!dir.empty()) return dir;
  dir = (fs::temp_directory_path() / ("dllmq_bench_" + std::to_string(::getpid()))).string();
  fs::create_directories(dir);
  std::ofstream(dir + "/config.json")
      << "{\"model_type\":\"llada\",\"architectures\":[\"LLaDAModelLM\"],"
         "\"block_type\":\"llama\",\"d_model\":4096,\"n_heads\":32,\"n_kv_heads\":32,"
         "\"n_layers\":1,\"mlp_hidden_size\":12288,\"vocab_size\":256,"
         "\"embedding_size\":256,\"rope_theta\":500000.0,\"rms_norm_eps\":1e-5,"
         "\"mask_token_id\":255,\"eos_token_id\":254}";
  struct T {
    std::string name;
    int64_t rows, cols;
  };
  const std::string b = "model.transformer.blocks.0.";
  std::vector<T> ts = {{"model.transformer.wte.weight", kVocab, kD},
                       {b + "attn_norm.weight", kD, 0},
                       {b + "q_proj.weight", kD, kD},
                       {b + "k_proj.weight", kD, kD},
                       {b + "v_proj.weight", kD, kD},
                       {b + "attn_out.weight", kD, kD},
                       {b + "ff_norm.weight", kD, 0},
                       {b + "ff_proj.weight", kMlp, kD},
                       {b + "up_proj.weight", kMlp, kD},
                       {b + "ff_out.weight", kD, kMlp},
                       {"model.transformer.ln_f.weight", kD, 0},
                       {"model.transformer.ff_out.weight", kVocab, kD}};
  std::string header = "{";
  size_t off = 0;
  for (auto& t : ts) {
    const size_t n = size_t(t.rows) * (t.cols ? t.cols : 1) * 2;
    const std::string shape =
        t.cols ? fmt::format("{},{}", t.rows, t.cols) : fmt::format("{}", t.rows);
    header += fmt::format(R"({}"{}":{{"dtype":"BF16","shape":[{}],"data_offsets":[{},{}]}})",
                          header.size() > 1 ? "," : "", t.name, shape, off, off + n);
    off += n;
  }
  header += "}";
  std::ofstream f(dir + "/model.safetensors", std::ios::binary);
  uint64_t hl = header.size();
  f.write(reinterpret_cast<const char*>(&hl), 8);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  std::mt19937 g(1);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  std::vector<uint16_t> buf(1 << 20);
  for (size_t written = 0; written < off;) {
    const size_t n = std::min(buf.size(), (off - written) / 2);
    for (size_t i = 0; i < n; ++i) buf[i] = dllmq::f32_to_bf16(nd(g));
    f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(n * 2));
    written += n * 2;
  }
  return dir;
}

void BM_LayerForward(benchmark::State& st) {
  static std::unique_ptr<dllmq::Model> m = dllmq::Model::load(make_checkpoint());
  const int n = static_cast<int>(st.range(0));
  m->set_compute_dtype(st.range(1) ? dllmq::ComputeDType::kBF16 : dllmq::ComputeDType::kF32);
  st.SetLabel(dllmq::compute_dtype_name(m->compute_dtype()));
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = i % 200;
  dllmq::ForwardArgs a;
  a.ids = ids;
  m->forward(a, nullptr);  // warm the workspace and page in the weights
  for (auto _ : st) m->forward(a, nullptr);
  const double flops = m->forward_flops(n, n, 0);
  st.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_LayerForward)
    ->ArgsProduct({{32, 512}, {0, 1}})  // tokens, bf16 compute
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The same layer with its projections as int8 (per output channel) and int4 (groups of 128)
// codes, written by `dllmq quantize`'s quantize_checkpoint from the bf16 checkpoint above: seconds
// per layer at 1, 8 and 32 rows in fp32 compute. Rows: /tokens/format (0 bf16, 8 int8, 4 int4)/
// a8 (1: --w8a8, int8 activations on the integer kernel, ops/int8_act_gemm.h).
// peak_RSS_MB: since the model's load began (the checkpoint writing and quantizing before it left
// out); run one format per process for its own figure, e.g.
//   build/bench/forward_bench --benchmark_filter='LayerWeightFormat/.*/4/0/'
// Peak resident memory since the last reset_peak_rss(), in MB (VmHWM of /proc/self/status; the
// reset writes 5 to /proc/self/clear_refs, Linux >= 4.0), so that a model's figure leaves out the
// bf16 checkpoint writing and quantizing that came before it in this process.
void reset_peak_rss() {
  std::ofstream("/proc/self/clear_refs") << "5";
}
double peak_rss_mb() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;  // kB
  return 0.0;
}

void BM_LayerWeightFormat(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0)), format = static_cast<int>(st.range(1));
  const bool a8 = st.range(2) != 0;
  if (a8 && format == 0) {
    st.SkipWithError("--w8a8 needs integer codes");
    return;
  }
  static std::unique_ptr<dllmq::Model> models[5];
  const int slot = format == 0 ? 0 : (format == 8 ? 1 : 2) + (a8 ? 2 : 0);
  if (!models[slot]) {
    std::string dir = make_checkpoint();
    if (format != 0) {
      const dllmq::WeightQuantScheme s{format, format == 8 ? -1 : 128, true};
      const std::string q = dir + "-int" + std::to_string(format);
      dllmq::quantize_checkpoint(dir, q, s);
      dir = q;
    }
    reset_peak_rss();  // the model's own figure: loading, packing and the forwards
    models[slot] = dllmq::Model::load(dir);
    if (a8) models[slot]->use_int8_activations();
  }
  dllmq::Model& m = *models[slot];
  m.set_compute_dtype(dllmq::ComputeDType::kF32);
  st.SetLabel(dllmq::weight_format(m.weights()) + (a8 ? " " + m.w8a8() : std::string()));
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = i % 200;
  dllmq::ForwardArgs a;
  a.ids = ids;
  m.forward(a, nullptr);  // warm the workspace and page in the weights
  for (auto _ : st) m.forward(a, nullptr);
  st.counters["GFLOP/s"] = benchmark::Counter(m.forward_flops(n, n, 0) * 1e-9,
                                              benchmark::Counter::kIsIterationInvariantRate);
  st.counters["weight_MB"] = double(m.checkpoint().total_bytes()) / 1e6;
  st.counters["peak_RSS_MB"] = peak_rss_mb();
}
BENCHMARK(BM_LayerWeightFormat)
    ->ArgsProduct({{1, 8, 32}, {0, 8, 4}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// [n, 4096] x [4096, 4096]^T on the engine's GEMM backend (ops/gemm.h), the call the projections
// make (sgemm_nt: oneDNN's matmul primitive; gemm_bf16_nt for bf16 compute), one call with all
// cores to the library: its own ceiling for the projections at this shape. Rows: /tokens/bf16.
void BM_Gemm(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  const bool bf16 = st.range(1) != 0;
  if (bf16 && !dllmq::gemm_info().bf16_native) {
    st.SkipWithError("no native bf16 GEMM on this CPU");
    return;
  }
  std::vector<float> x(size_t(n) * kD, 0.5f), w(size_t(kD) * kD, 0.25f), y(size_t(n) * kD);
  std::vector<uint16_t> xb(x.size(), dllmq::f32_to_bf16(0.5f)),
      wb(w.size(), dllmq::f32_to_bf16(0.25f));
  const bool blas = dllmq::gemm_info().lib == dllmq::GemmLib::kOpenBlas;
  const int threads = omp_get_max_threads();
  if (blas) openblas_set_num_threads(threads);  // oneDNN threads by itself
  for (auto _ : st) {
    if (bf16)
      dllmq::gemm_bf16_nt(n, kD, kD, xb.data(), kD, wb.data(), kD, y.data(), kD);
    else
      dllmq::sgemm_nt(n, kD, kD, x.data(), kD, w.data(), kD, y.data(), kD);
  }
  st.SetLabel(dllmq::gemm_info().name + " " + dllmq::gemm_info().isa + (bf16 ? " bf16" : " fp32"));
  st.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * kD * kD * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  if (blas) openblas_set_num_threads(1);
  omp_set_num_threads(threads);  // OpenBLAS-openmp's setter changes OpenMP's count too
}
BENCHMARK(BM_Gemm)->ArgsProduct({{32, 512}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime();

// The same product the way the projections run it now: linear() on bf16 weights packed at load
// (ops/packed_gemm.h), all threads splitting the panels. Rows: /tokens/bf16 compute.
void BM_PackedProjection(benchmark::State& st) {
  const int n = static_cast<int>(st.range(0));
  std::vector<float> x(size_t(n) * kD, 0.5f), y(size_t(n) * kD);
  std::vector<uint16_t> wb(size_t(kD) * kD);
  std::mt19937 g(1);
  std::normal_distribution<float> nd(0.0f, 0.02f);
  for (uint16_t& v : wb) v = dllmq::f32_to_bf16(nd(g));
  dllmq::TensorView tv;
  tv.dtype = dllmq::DType::kBF16;
  tv.shape = {kD, kD};
  tv.data = wb.data();
  tv.nbytes = wb.size() * 2;
  dllmq::Linear l{&tv, nullptr, kD, kD};
  const auto dt = st.range(1) ? dllmq::ComputeDType::kBF16 : dllmq::ComputeDType::kF32;
  dllmq::pack_linear(l, dt);  // AMX tiles in bf16 compute where chosen, as a loaded model
  for (auto _ : st) dllmq::linear(x.data(), n, l, y.data(), 0, dt);
  st.SetLabel(l.packed->amx ? std::string("AMX tiles bf16")
                            : std::string("packed ") + dllmq::gemm_info().proj_isa +
                                  (st.range(1) ? " bf16" : " fp32"));
  st.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * kD * kD * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_PackedProjection)
    ->ArgsProduct({{32, 512}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  std::error_code ec;
  for (const char* suffix : {"", "-int8", "-int4"}) fs::remove_all(make_checkpoint() + suffix, ec);
  return 0;
}
