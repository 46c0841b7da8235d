#include "ops/gemm.h"

#include <cblas.h>
#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "io/dtype.h"
#include "ops/amx_gemm.h"
#include "ops/packed_gemm.h"
#include "util/best_time.h"
#include "util/cpu_features.h"

#ifdef DLLMQ_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>
#endif

namespace dllmq {

namespace {

std::string cpu_best_isa() {
  const CpuFeatures& f = cpu_features();
  if (f.avx512bf16) return "avx512_bf16";
  if (f.avx512f) return "avx512";
  if (f.avx2 && f.fma) return "avx2";
  if (f.avx) return "avx";
  return "sse";
}

bool cpu_has_avx2() {
  return cpu_best_isa() != "avx" && cpu_best_isa() != "sse";
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// How bf16 compute multiplies, as `inspect` and `bench` say it.
const char* bf16_path(const GemmInfo& i) {
  return i.bf16_native ? "native, oneDNN bf16 dot products"
         : i.bf16_dot  ? "packed kernels, AVX512-BF16 dot products (vdpbf16ps)"
         : i.bf16_amx  ? "AMX tiles (tdpbf16ps), weights repacked for them, attention too"
                       : "packed kernels, widened to f32 in registers";
}

// Our dot-product kernel runs where the projections' kernels are AVX-512 and the CPU has
// AVX512-BF16 (ops/packed_gemm.h, bf16dot_available).
bool bf16_dot_here() {
  return dispatch_isa() == Isa::kAvx512 && cpu_has_avx512_bf16();
}

// OpenBLAS's DYNAMIC_ARCH picks a kernel set by CPU model; anything older than Haswell's on a
// CPU with AVX2+FMA means the model was not in its table (e.g. 0.3.21 on Emerald Rapids runs
// "Prescott", SSE3: ~5x slower sgemm).
GemmInfo probe_openblas() {
  GemmInfo i;
  i.lib = GemmLib::kOpenBlas;
  i.name = "OpenBLAS";
  if (const char* cfg = openblas_get_config()) {
    // "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64": keep the version.
    const std::string c = cfg;
    const size_t sp = c.find(' ', 9);
    i.name = c.substr(0, sp);
  }
  i.isa = openblas_get_corename() ? openblas_get_corename() : "unknown";
  i.cpu_isa = cpu_best_isa();
  const std::string core = lower(i.isa);
  static const char* kTuned[] = {"haswell", "zen", "skylakex", "cooperlake", "sapphirerapids"};
  const bool tuned =
      std::any_of(std::begin(kTuned), std::end(kTuned), [&](const char* t) { return core == t; });
  i.generic = cpu_has_avx2() && !tuned;
  i.bf16_why = "packed kernels, widened to f32 in registers (OpenBLAS has no bf16 products)";
  return i;
}

// Both libraries (OpenMP builds) run a call on omp_get_max_threads() threads unless it comes from
// inside an active parallel region; OpenBLAS reads that count on every call, whatever
// openblas_set_num_threads() said. All of the engine's parallelism is its own: a product it runs
// serially (a small one, from no region or from an inactive `parallel if` region) must stay on
// the calling thread. Left to the library, such a call opened a nested team, and libgomp starts a
// nested team's threads anew each time: a 16-row 256x256 product took 103 us instead of 28
// (thread creation and wake-ups; embedded model, Xeon, 2 threads). It also makes every oneDNN
// primitive planned for one thread, wherever it is first created (its kernel, hence its bits).
class LibraryOnCallingThread {
 public:
  LibraryOnCallingThread() : saved_(omp_get_max_threads()) {
    if (saved_ != 1) omp_set_num_threads(1);
  }
  ~LibraryOnCallingThread() {
    if (saved_ != 1) omp_set_num_threads(saved_);
  }
  LibraryOnCallingThread(const LibraryOnCallingThread&) = delete;
  LibraryOnCallingThread& operator=(const LibraryOnCallingThread&) = delete;

 private:
  int saved_;
};

#ifdef DLLMQ_HAVE_ONEDNN
const char* dnnl_isa_name(dnnl_cpu_isa_t isa) {
  switch (isa) {
    case dnnl_cpu_isa_sse41:
      return "sse41";
    case dnnl_cpu_isa_avx:
      return "avx";
    case dnnl_cpu_isa_avx2:
      return "avx2";
    case dnnl_cpu_isa_avx2_vnni:
      return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic:
      return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops:
      return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core:
      return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx:
      return "avx512_core_amx";
    default:
      return "generic";
  }
}

dnnl::engine& dnnl_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

using MatmulKey = std::tuple<int, int, int, int, int, int, int>;  // dtype, m, n, k, lda, ldb, ldc

// [m, k] x [n, k]^T -> f32 [m, n] in `in` (f32 or bf16) with f32 accumulation: the shape of
// every projection (B = the weights, row-major [n, k]).
dnnl::matmul::primitive_desc nt_matmul_pd(dnnl::memory::data_type in, int m, int n, int k, int lda,
                                          int ldb, int ldc) {
  using dt = dnnl::memory::data_type;
  const dnnl::memory::desc a({m, k}, in, {lda, 1});
  const dnnl::memory::desc b({k, n}, in, {1, ldb});  // B^T of a row-major [n, k]
  const dnnl::memory::desc c({m, n}, dt::f32, {ldc, 1});
  return dnnl::matmul::primitive_desc(dnnl::matmul::desc(a, b, c), dnnl_engine());
}

dnnl::matmul::primitive_desc bf16_matmul_pd(int m, int n, int k, int lda, int ldb, int ldc) {
  return nt_matmul_pd(dnnl::memory::data_type::bf16, m, n, k, lda, ldb, ldc);
}

// A matmul primitive per shape, created on first use (per thread: primitives are reentrant but
// the map is not shared, so no lock on the hot path). The primitive (oneDNN's brgemm kernels)
// rather than dnnl_sgemm: at the dual-cache step's 32 rows dnnl_sgemm runs at ~half its large-M
// rate (it packs both operands per call), the primitive at ~70% more (docs/performance.md).
// A server sees a new row count with every prompt length, so the cache keeps the most recently
// used shapes only (each holds JIT code; unbounded, it grew a busy server's RSS without end).
// Re-creating an evicted shape gives the same kernel, hence the same numerics.
constexpr size_t kMaxCachedMatmuls = 256;

struct CachedMatmul {
  dnnl::matmul prim;
  dnnl::matmul::primitive_desc pd;
  uint64_t last_use = 0;
};

void run_nt_matmul(dnnl::memory::data_type in, int m, int n, int k, const void* a, int lda,
                   const void* b, int ldb, float* c, int ldc) {
  const LibraryOnCallingThread one_thread;
  thread_local std::map<MatmulKey, CachedMatmul> cache;
  thread_local uint64_t uses = 0;
  thread_local dnnl::stream stream(dnnl_engine());
  const MatmulKey key{int(in), m, n, k, lda, ldb, ldc};
  auto it = cache.find(key);
  if (it == cache.end()) {
    if (cache.size() >= kMaxCachedMatmuls)
      cache.erase(std::min_element(cache.begin(), cache.end(), [](const auto& x, const auto& y) {
        return x.second.last_use < y.second.last_use;
      }));
    auto pd = nt_matmul_pd(in, m, n, k, lda, ldb, ldc);
    it = cache.emplace(key, CachedMatmul{dnnl::matmul(pd), pd}).first;
  }
  it->second.last_use = ++uses;
  const auto& pd = it->second.pd;
  dnnl::memory am(pd.src_desc(), dnnl_engine(), const_cast<void*>(a));
  dnnl::memory bm(pd.weights_desc(), dnnl_engine(), const_cast<void*>(b));
  dnnl::memory cm(pd.dst_desc(), dnnl_engine(), c);
  it->second.prim.execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  stream.wait();
}

GemmInfo probe_onednn() {
  GemmInfo i;
  i.lib = GemmLib::kOneDnn;
  const dnnl_version_t* v = dnnl_version();
  i.name = fmt::format("oneDNN {}.{}.{}", v->major, v->minor, v->patch);
  const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
  i.isa = dnnl_isa_name(isa);
  i.cpu_isa = cpu_best_isa();
  i.generic =
      isa == dnnl_cpu_isa_all || (cpu_has_avx2() && (isa & dnnl_cpu_isa_avx2) != dnnl_cpu_isa_avx2);
  // bf16 products are worth it only on a JIT kernel with bf16 dot products; elsewhere oneDNN
  // runs a reference loop and widening to f32 is much faster.
  if ((isa & dnnl_cpu_isa_avx512_core_bf16) == dnnl_cpu_isa_avx512_core_bf16) {
    try {
      const std::string impl = bf16_matmul_pd(32, 256, 256, 256, 256, 256).impl_info_str();
      i.bf16_jit = impl.find("ref") == std::string::npos;
    } catch (const dnnl::error&) {
      i.bf16_jit = false;
    }
  }
  if (!i.bf16_jit)
    i.bf16_why = "packed kernels, widened to f32 in registers (no bf16 dot-product kernel here)";
  return i;
}
#endif

// The path forced to native, dot or AMX (at most one asked for), each only where it can run here;
// none of them: widening.
void set_bf16_path(GemmInfo& i, bool native, bool dot, bool amx) {
  i.bf16_native = native && i.bf16_jit;
  i.bf16_dot = dot && bf16_dot_here();
  i.bf16_amx = amx && amx_available();
}

// How bf16 compute multiplies: the packed kernels widening bf16 weights to f32 in registers (the
// default), the same packed panels on the AVX512-BF16 dot product (our kernel, where the CPU has
// it), our AMX tile kernel over weights repacked for it (where the CPU has AMX-BF16), or oneDNN's
// bf16 matmul (where it has a JIT kernel: AVX512-BF16/AMX). Same numerics class (bf16 inputs, f32
// products and sums), other summation orders. A dot-product instruction is not faster on every
// CPU that has one: on Zen 4 oneDNN's ran at ~2x the f32 rate, on an Emerald Rapids Xeon at
// 0.55-0.75x, and on a Xeon whose vdpbf16ps gives half the FMA FLOP rate it cannot win
// (docs/performance.md). So the choice is measured, not read from a CPU-model table: a thread's
// share of a projection (512 x 1024: half of a d-1024 model's square weight, the oneDNN candidate
// in 256-column calls as linear() makes them) at the dual-cache step's 32 rows and at a prompt's
// 256, one per thread on every thread as the engine runs them; the fastest candidate replaces
// widening only if it takes at most 1/1.2 of its time over both, so a near tie never flips
// between runs. (With 256 columns, the AMX kernel's per-call conversion of the activations
// weighed 4x more than in the engine, and a loaded machine chose oneDNN.)
// DLLMQ_BF16_GEMM=widened|dot|amx|native forces the choice (reproducing bits across machines); a
// choice this CPU or build cannot run falls back to widening and says so. Run once for the
// backend (a start-up cost of ~60 ms for all four candidates on the Emerald Rapids Xeon).
void choose_bf16_products(GemmInfo& i) {
  set_bf16_path(i, false, false, false);  // widening unless chosen below
  const bool dot_here = bf16_dot_here();
  const bool amx_here = amx_available();
  const char* env = std::getenv("DLLMQ_BF16_GEMM");
  const std::string want = env ? lower(env) : "";
  if (want == "native" || want == "widened" || want == "dot" || want == "amx") {
    set_bf16_path(i, want == "native", want == "dot", want == "amx");
    const bool refused = (want == "native" && !i.bf16_native) || (want == "dot" && !i.bf16_dot) ||
                         (want == "amx" && !i.bf16_amx);
    i.bf16_why = fmt::format("{} (DLLMQ_BF16_GEMM={}{})", bf16_path(i), want,
                             refused ? ", which this CPU or build cannot run" : "");
    return;
  }
  if (!i.bf16_jit && !dot_here && !amx_here) return;  // bf16_why says so already
  constexpr int n = 512, k = 1024, native_cols = 256;
  double native_s = 0.0, dot_s = 0.0, amx_s = 0.0, widened_s = 0.0;
#pragma omp parallel reduction(max : native_s, dot_s, amx_s, widened_s)
  {
    // this thread's sums (the reduction copies start at -inf)
    double nat = 0.0, dot = 0.0, amx = 0.0, wid = 0.0;
    for (const int m : {32, 256}) {
      std::vector<uint16_t> a(size_t(m) * k), b(size_t(n) * k);
      for (size_t j = 0; j < a.size(); ++j) a[j] = uint16_t(0x3f00 + j % 127);  // ~[0.5, 1)
      for (size_t j = 0; j < b.size(); ++j) b[j] = uint16_t(0xbc00 + j % 251);  // small negatives
      std::vector<float> af(a.size()), c(size_t(m) * n);
      to_f32(DType::kBF16, a.data(), af.data(), af.size());
      // The packed kernels (ops/packed_gemm.h) on f32 activations rounded to bf16 and the bf16
      // weights packed at load: widened in registers, or on the dot product.
      const auto packed = pack_weight(b.data(), DType::kBF16, n, k, dispatch_isa(), false);
      const kern::Block blk{af.data(), k, m, c.data(), n};
      wid += best_time([&] { packed_gemm(*packed, {&blk, 1}, 0, packed->panels(), true); }, 0.0, 5);
      if (dot_here)
        dot += best_time(
            [&] {
              packed_gemm_bf16dot(*packed, {&blk, 1}, 0, packed->panels());
            },
            0.0, 5);
      if (amx_here) {
        const auto tiles = pack_weight_amx(b.data(), DType::kBF16, n, k, false);
        amx += best_time([&] { packed_gemm_amx(*tiles, {&blk, 1}, 0, tiles->panels()); }, 0.0, 5);
      }
#ifdef DLLMQ_HAVE_ONEDNN
      if (i.bf16_jit)
        nat += best_time(
            [&] {
              for (int c0 = 0; c0 < n; c0 += native_cols)
                run_nt_matmul(dnnl::memory::data_type::bf16, m, native_cols, k, a.data(), k,
                              b.data() + size_t(c0) * k, k, c.data() + c0, n);
            },
            0.0, 5);
#endif
    }
    native_s = nat;
    dot_s = dot;
    amx_s = amx;
    widened_s = wid;
  }
  // The fastest candidate, if it beats widening by the margin.
  struct Candidate {
    bool here;
    double s;
    bool* flag;
  };
  const Candidate cands[] = {{dot_here, dot_s, &i.bf16_dot},
                             {amx_here, amx_s, &i.bf16_amx},
                             {i.bf16_jit, native_s, &i.bf16_native}};
  const Candidate* best = nullptr;
  for (const Candidate& cand : cands)
    if (cand.here && (best == nullptr || cand.s < best->s)) best = &cand;
  if (best != nullptr && best->s * 1.2 <= widened_s) *best->flag = true;
  std::string measured;
  auto add = [&measured](const std::string& part) {
    measured += (measured.empty() ? "" : ", ") + part;
  };
  if (dot_here) add(fmt::format("vdpbf16ps kernel {:.2f}x", widened_s / dot_s));
  if (amx_here) add(fmt::format("AMX kernel {:.2f}x", widened_s / amx_s));
  if (i.bf16_jit) add(fmt::format("oneDNN bf16 {:.2f}x", widened_s / native_s));
  i.bf16_why =
      fmt::format("{} (measured against the widened f32 kernel here: {})", bf16_path(i), measured);
}

GemmInfo select_backend() {
  const char* env = std::getenv("DLLMQ_GEMM");
  const std::string want = env ? lower(env) : "";
  GemmInfo ob = probe_openblas();
#ifdef DLLMQ_HAVE_ONEDNN
  GemmInfo dn = probe_onednn();
  if (want == "openblas") {
    ob.why = "DLLMQ_GEMM=openblas";
    return ob;
  }
  if (want == "onednn") {
    dn.why = "DLLMQ_GEMM=onednn";
    return dn;
  }
  if (!dn.generic) {
    dn.why = fmt::format(
        "JIT for the instruction set ({}){}", dn.isa,
        ob.generic ? fmt::format("; OpenBLAS would run its generic '{}' kernels", ob.isa) : "");
    return dn;
  }
  if (!ob.generic) {
    ob.why =
        fmt::format("oneDNN has no tuned kernel here ({}), OpenBLAS does ({})", dn.isa, ob.isa);
    return ob;
  }
  dn.why = "no library has kernels tuned for this CPU";
  return dn;
#else
  ob.why = want == "onednn" ? "DLLMQ_GEMM=onednn, but oneDNN is not compiled in"
                            : "the only library compiled in";
  return ob;
#endif
}

GemmInfo& backend() {
  static GemmInfo info = [] {
    // All parallelism is ours (panels, heads). OpenBLAS-openmp's openblas_set_num_threads() also
    // calls omp_set_num_threads(): left alone it silently made every OpenMP region of the engine
    // single-threaded (one core busy of two). Keep the OpenMP thread count as it was.
    const int omp_threads = omp_get_max_threads();
    openblas_set_num_threads(1);
    omp_set_num_threads(omp_threads);
    GemmInfo i = select_backend();
    i.proj_isa = isa_name(dispatch_isa());
    const char* forced = std::getenv("DLLMQ_ISA");
    i.proj_why = forced != nullptr && *forced != '\0'
                     ? fmt::format("DLLMQ_ISA={}", forced)
                     : fmt::format("the best this CPU has, from CPUID{}",
                                   cpu_has_avx512_bf16() ? "; it has AVX512-BF16" : "");
    choose_bf16_products(i);
    if (i.generic)
      fmt::print(stderr,
                 "dllmq: warning: GEMM backend {} runs generic '{}' kernels on this CPU (it has "
                 "{}): expect several times lower speed ({})\n",
                 i.name, i.isa, i.cpu_isa, i.why);
    return i;
  }();
  return info;
}

}  // namespace

const GemmInfo& gemm_info() {
  return backend();
}

bool gemm_available(GemmLib lib) {
#ifdef DLLMQ_HAVE_ONEDNN
  return true;
#else
  return lib == GemmLib::kOpenBlas;
#endif
}

const char* gemm_lib_name(GemmLib lib) {
  return lib == GemmLib::kOneDnn ? "onednn" : "openblas";
}

void gemm_select(GemmLib lib) {
  GemmInfo& b = backend();
  if (b.lib == lib || !gemm_available(lib)) return;
#ifdef DLLMQ_HAVE_ONEDNN
  const std::string proj_isa = b.proj_isa, proj_why = b.proj_why;
  b = lib == GemmLib::kOneDnn ? probe_onednn() : probe_openblas();
  b.proj_isa = proj_isa;
  b.proj_why = proj_why;
  choose_bf16_products(b);
  b.why = "selected by the caller";
#endif
}

namespace {

// One bf16 product path forced (at most one of the three), reported as forced.
GemmInfo& force_bf16_path(bool native, bool dot, bool amx) {
  GemmInfo& b = backend();
  set_bf16_path(b, native, dot, amx);
  b.bf16_why = fmt::format("{} (forced)", bf16_path(b));
  return b;
}

}  // namespace

bool gemm_set_bf16_native(bool native) {
  return force_bf16_path(native, false, false).bf16_native;
}

bool gemm_set_bf16_dot(bool dot) {
  return force_bf16_path(false, dot, false).bf16_dot;
}

bool gemm_set_bf16_amx(bool amx) {
  return force_bf16_path(false, false, amx).bf16_amx;
}

int gemm_threads() {
  return omp_get_max_threads();
}

namespace {
// The calling thread's CPUs before pin_threads() narrowed them (what unpin_this_thread restores).
std::mutex g_pin_mu;
bool g_unpinned_known = false;
cpu_set_t g_unpinned;
}  // namespace

void pin_threads() {
  static int pinned_for = 0;
  const int nt = omp_get_max_threads();
  if (pinned_for == nt) return;
  pinned_for = nt;
  if (const char* e = std::getenv("DLLMQ_PIN"); e && std::strcmp(e, "0") == 0) return;
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return;
  {
    std::lock_guard<std::mutex> lk(g_pin_mu);
    if (!g_unpinned_known) g_unpinned = mask;
    g_unpinned_known = true;
  }
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mask)) cpus.push_back(c);
  if (int(cpus.size()) < nt || nt < 2) return;  // oversubscribed or serial: leave it to the OS
#pragma omp parallel num_threads(nt)
  {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpus[omp_get_thread_num()], &one);
    sched_setaffinity(0, sizeof(one), &one);
  }
}

void sgemm(bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
           int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  const LibraryOnCallingThread one_thread;
#ifdef DLLMQ_HAVE_ONEDNN
  if (backend().lib == GemmLib::kOneDnn) {
    dnnl_sgemm('N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
#endif
  cblas_sgemm(CblasRowMajor, CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
              lda, b, ldb, beta, c, ldc);
}

void sgemm_nt(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
              int ldc) {
  if (m <= 0 || n <= 0) return;
  const LibraryOnCallingThread one_thread;
#ifdef DLLMQ_HAVE_ONEDNN
  if (backend().lib == GemmLib::kOneDnn) {
    run_nt_matmul(dnnl::memory::data_type::f32, m, n, k, a, lda, b, ldb, c, ldc);
    return;
  }
#endif
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
}

void gemm_bf16_nt(int m, int n, int k, const uint16_t* a, int lda, const uint16_t* b, int ldb,
                  float* c, int ldc) {
#ifdef DLLMQ_HAVE_ONEDNN
  if (m > 0 && n > 0) run_nt_matmul(dnnl::memory::data_type::bf16, m, n, k, a, lda, b, ldb, c, ldc);
#else
  (void)m, (void)n, (void)k, (void)a, (void)lda, (void)b, (void)ldb, (void)c, (void)ldc;
#endif
}

bool gemm_bf16_nt_onednn(int m, int n, int k, const uint16_t* a, int lda, const uint16_t* b,
                         int ldb, float* c, int ldc) {
#ifdef DLLMQ_HAVE_ONEDNN
  try {
    gemm_bf16_nt(m, n, k, a, lda, b, ldb, c, ldc);
    return true;
  } catch (const dnnl::error&) {
    return false;  // no bf16 matmul at all on this CPU (oneDNN 2.x needs AVX-512 for bf16)
  }
#else
  return false;
#endif
}

void sgemm_ref(bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int t = 0; t < k; ++t)
        acc += double(a[size_t(i) * lda + t]) *
               (trans_b ? b[size_t(j) * ldb + t] : b[size_t(t) * ldb + j]);
      float& cij = c[size_t(i) * ldc + j];
      cij = static_cast<float>(alpha * acc + (beta == 0.0f ? 0.0 : double(beta) * cij));
    }
}

void unpin_this_thread() {
  std::lock_guard<std::mutex> lk(g_pin_mu);
  if (g_unpinned_known) sched_setaffinity(0, sizeof(g_unpinned), &g_unpinned);
}

}  // namespace dllmq
