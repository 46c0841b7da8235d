// Attention over a cached layer in LLaDA-8B head geometry (32 heads, 32 KV heads, head dim 128;
// 32 query rows, one layer) for each KV store: dense fp32 / fp16, KIVI 4 / 2 bits, KVQuant
// 4 / 2 bits, at 1k, 4k and 16k cached rows. A quantized store dequantizes tile by tile inside
// attention(), so its time against fp16's says whether reading fewer bytes pays for the unpacking.
// Each also with bf16 compute on AMX tiles (tiles:1; skipped without AMX). Counters: bytes the call
// reads (the store's held() bytes for the rows) and that over the time.
//   OMP_NUM_THREADS=2 build/bench/attention_bench --benchmark_counters_tabular=true
// ("read" is bytes per second: held bytes of the rows over the time per call.)
#include <benchmark/benchmark.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cache/dense_kv_store.h"
#include "cache/kivi_kv_store.h"
#include "cache/kv_store.h"
#include "cache/kvquant_kv_store.h"
#include "io/calib_artifact.h"
#include "ops/amx_gemm.h"
#include "ops/attention.h"
#include "ops/attention_amx.h"
#include "ops/gemm.h"
#include "ops/rope.h"
#include "quant/bitpack.h"

namespace {

using namespace dllmq;

constexpr int kHeads = 32, kKvHeads = 32, kHd = 128, kQueries = 32, kMaxRows = 16384;
constexpr int kChunk = 512;  // rows per write while filling (a multiple of KIVI's G = 32)
const KvGeometry kGeo{1, kKvHeads, kHd};

enum class Kind { kF32, kF16, kKivi4, kKivi2, kKvQuant4, kKvQuant2 };

// Cheap normal deviates (Box-Muller on splitmix64): filling 16k rows with std::normal_distribution
// would take longer than the measurements.
class Normal {
 public:
  explicit Normal(uint64_t seed) : s_(seed) {}
  float operator()() {
    if (have_) {
      have_ = false;
      return spare_;
    }
    const double u1 = (double(next() >> 11) + 0.5) * 0x1.0p-53,
                 u2 = double(next() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1)), a = 6.283185307179586 * u2;
    spare_ = float(r * std::sin(a));
    have_ = true;
    return float(r * std::cos(a));
  }

 private:
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t s_;
  float spare_ = 0;
  bool have_ = false;
};

// Pre-RoPE K channel c ~ N(mean(c), sd(c)): a few wide, off-centre channels like real keys.
float k_sd(int c) {
  return c % 13 == 3 ? 4.0f : 1.0f;
}
float k_mean(int c) {
  return c % 13 == 3 ? 1.5f : 0.0f;
}

// KVQuant artifact for that distribution: thresholds at the 0.5 / 99.5 percentiles
// (mean -+ 2.576 sd, ~1% outliers); codebooks ascending in [-1, 1], denser near 0. The
// codebook's values do not change the work of a read, only its accuracy.
CalibArtifact make_artifact(int bits) {
  CalibArtifact a;
  a.bits_k = a.bits_v = bits;
  a.sink = 1;
  a.outlier_percent = 1.0;
  a.n_layers = kGeo.n_layers;
  a.n_kv_heads = kKvHeads;
  a.head_dim = kHd;
  CalibLayer l;
  for (int c = 0; c < kGeo.kv_dim(); ++c) {
    const int ch = c % kHd;
    l.k_lower.push_back(k_mean(ch) - 2.576f * k_sd(ch));
    l.k_upper.push_back(k_mean(ch) + 2.576f * k_sd(ch));
  }
  const int k = 1 << bits;
  for (int i = 0; i < k; ++i) {
    const double t = -1.0 + 2.0 * i / (k - 1);
    const double c = std::copysign(std::pow(std::fabs(t), 1.3), t);
    l.k_codebook.push_back(float(c));
    l.v_codebook.push_back(float(c));
  }
  a.layers.push_back(std::move(l));
  return a;
}

const RopeTable& rope() {
  static RopeTable* r = [] {
    auto* t = new RopeTable(kHd, 500000.0);
    t->reserve(kMaxRows);
    return t;
  }();
  return *r;
}

std::unique_ptr<KvStore> make_store(Kind kind) {
  switch (kind) {
    case Kind::kF32:
      return std::make_unique<DenseKvStore>(kGeo, DType::kF32, rope());
    case Kind::kF16:
      return std::make_unique<DenseKvStore>(kGeo, DType::kF16, rope());
    case Kind::kKivi4:
      return std::make_unique<KiviKvStore>(kGeo, KiviConfig{4, 4, 32, {}}, rope());
    case Kind::kKivi2:
      return std::make_unique<KiviKvStore>(kGeo, KiviConfig{2, 2, 32, {}}, rope());
    case Kind::kKvQuant4:
      return std::make_unique<KvQuantKvStore>(kGeo, make_artifact(4), rope());
    case Kind::kKvQuant2:
      return std::make_unique<KvQuantKvStore>(kGeo, make_artifact(2), rope());
  }
  return nullptr;
}

// The store of the running benchmark, filled once: Google Benchmark calls a benchmark function
// several times (iteration estimate, then the measured run), and one store at a time keeps the
// 16k fp32 case (512 MiB) the peak.
const KvStore& filled_store(Kind kind, int rows) {
  static std::unique_ptr<KvStore> s;
  static Kind have_kind;
  static int have_rows = -1;
  if (s && have_kind == kind && have_rows == rows) return *s;
  s.reset();
  s = make_store(kind);
  s->reset(rows);
  const int kvd = kGeo.kv_dim();
  std::vector<float> k(size_t(kChunk) * kvd), v(k.size());
  Normal nd(uint64_t(rows) * 7919);
  for (int p0 = 0; p0 < rows; p0 += kChunk) {
    const int n = std::min(kChunk, rows - p0);
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < kvd; ++c) {
        const int ch = c % kHd;
        k[size_t(r) * kvd + c] = k_mean(ch) + k_sd(ch) * nd();
        v[size_t(r) * kvd + c] = nd();
      }
    s->write(0, p0, n, k.data(), v.data());
  }
  have_kind = kind;
  have_rows = rows;
  return *s;
}

// bf16 compute's products put on AMX tiles (or taken off them) for one benchmark, and back.
class Bf16TilesFor {
 public:
  explicit Bf16TilesFor(bool on) : on_(on), was_(gemm_info().bf16_amx) {
    if (on_) gemm_set_bf16_amx(true);
  }
  ~Bf16TilesFor() {
    if (on_) gemm_set_bf16_amx(was_);
  }

 private:
  bool on_, was_;
};

// tiles (second argument): bf16 compute on AMX tiles (ops/attention_amx.h), the store's rows
// dequantized to f32 tiles as before and rounded to bf16 in tile order.
void BM_Attention(benchmark::State& st, Kind kind) {
  const int rows = static_cast<int>(st.range(0));
  const bool tiles = st.range(1) != 0;
  if (tiles && !amx_available()) {
    st.SkipWithError("no AMX tiles on this CPU");
    return;
  }
  const Bf16TilesFor path(tiles);
  const KvStore& s = filled_store(kind, rows);
  st.SetLabel(s.name() + (tiles ? ", AMX tiles" : ""));
  std::vector<float> q(size_t(kQueries) * kHeads * kHd), out(q.size());
  Normal nd(17);
  for (auto& x : q) x = nd();
  StoredKvRows src(s, 0, {0, rows});
  const KvRowSource* srcs[] = {&src};
  attention(q.data(), kQueries, kHeads, kKvHeads, kHd, srcs, out.data(), tiles);  // warm scratch
  for (auto _ : st) {
    attention(q.data(), kQueries, kHeads, kKvHeads, kHd, srcs, out.data(), tiles);
    benchmark::DoNotOptimize(out.data());
  }
  // One layer held, all of it read: held() is the bytes of the rows this call reads.
  const double bytes = double(s.held().total());
  st.counters["MiB/call"] = bytes / (1 << 20);
  st.counters["read"] = benchmark::Counter(bytes, benchmark::Counter::kIsIterationInvariantRate);
}

// One decode layer's attention at a small model's geometry (8 heads of 128, as /tmp/bm1024 in
// docs/performance.md): `fresh` rows computed in this forward (the queries are those rows) plus
// `cached` rows read from a dense store of the compute dtype's KV (f32 for fp32, bf16 for bf16).
// none: 256 fresh, 0 cached; prefix: 128 fresh (the suffix canvas), 128 cached; dual: 32 fresh,
// 224 cached. bf16: 0 fp32 compute (f32 store), 1 bf16 compute's store with f32 products (what
// bf16 compute runs where its products are not on AMX tiles), 2 bf16 compute on AMX tiles
// (ops/attention_amx.h; skipped without AMX). Counter: GFLOP/s of the two products
// (4 * nq * nk * heads * hd).
void BM_AttentionDecode(benchmark::State& st) {
  constexpr int kH = 8, kD = 128;
  const int fresh = static_cast<int>(st.range(0)), cached = static_cast<int>(st.range(1));
  const bool bf16 = st.range(2) != 0, tiles = st.range(2) == 2;
  if (tiles && !amx_available()) {
    st.SkipWithError("no AMX tiles on this CPU");
    return;
  }
  const Bf16TilesFor path(tiles);
  const KvGeometry geo{1, kH, kD};
  DenseKvStore store(geo, bf16 ? DType::kBF16 : DType::kF32, rope());
  Normal nd(uint64_t(fresh) * 31 + cached);
  const size_t w = size_t(kH) * kD;
  std::vector<float> q(fresh * w), k(fresh * w), v(fresh * w), out(q.size());
  for (auto* b : {&q, &k, &v})
    for (auto& x : *b) x = nd();
  if (cached > 0) {
    store.reset(cached + fresh);
    std::vector<float> ck(cached * w), cv(cached * w);
    for (auto* b : {&ck, &cv})
      for (auto& x : *b) x = nd();
    store.write(0, 0, cached, ck.data(), cv.data());
  }
  StoredKvRows stored(store, 0, {0, cached});
  FreshKvRows fr(k.data(), v.data(), fresh, int(w), kD);
  std::vector<const KvRowSource*> srcs;
  if (cached > 0) srcs.push_back(&stored);
  srcs.push_back(&fr);
  attention(q.data(), fresh, kH, kH, kD, srcs, out.data(), tiles);  // warm scratch
  for (auto _ : st) {
    attention(q.data(), fresh, kH, kH, kD, srcs, out.data(), tiles);
    benchmark::DoNotOptimize(out.data());
  }
  const double flops = 4.0 * fresh * (fresh + cached) * kH * kD;
  st.SetLabel(tiles  ? "bf16 KV, AMX tiles"
              : bf16 ? "bf16 KV, f32 products"
                     : "f32 KV, f32 products");
  st.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void register_all() {
  for (int bf16 : {0, 1, 2})
    for (auto [fresh, cached] : {std::pair{256, 0}, {128, 128}, {32, 224}})
      benchmark::RegisterBenchmark("BM_AttentionDecode", BM_AttentionDecode)
          ->Args({fresh, cached, bf16})
          ->ArgNames({"fresh", "cached", "bf16"})
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
  const std::pair<Kind, const char*> kinds[] = {
      {Kind::kF32, "fp32"},    {Kind::kF16, "fp16"},          {Kind::kKivi4, "kivi4"},
      {Kind::kKivi2, "kivi2"}, {Kind::kKvQuant4, "kvquant4"}, {Kind::kKvQuant2, "kvquant2"}};
  for (auto [kind, label] : kinds)
    for (int tiles : {0, 1})
      for (int rows : {1024, 4096, 16384})
        benchmark::RegisterBenchmark((std::string("BM_Attention/") + label).c_str(), BM_Attention,
                                     kind)
            ->Args({rows, tiles})
            ->ArgNames({"rows", "tiles"})
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
  // The engine's setting: attention parallelises over heads with OpenMP, the GEMM library runs
  // serial inside. Selecting the backend calls openblas_set_num_threads(1), which in the OpenMP
  // build of OpenBLAS also sets OpenMP's thread count to 1, so the count is restored after it.
  const int threads = std::getenv("OMP_NUM_THREADS") ? omp_get_max_threads() : 2;
  const GemmInfo& gemm = gemm_info();
  omp_set_num_threads(threads);
  benchmark::AddCustomContext("quant_isa", quant_isa());
  benchmark::AddCustomContext("gemm", gemm.name + " (" + gemm.isa + ")");
  benchmark::AddCustomContext("omp_threads", std::to_string(omp_get_max_threads()));
  benchmark::Initialize(&argc, argv);
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
