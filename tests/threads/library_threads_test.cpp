// The GEMM libraries run every call on the calling thread (ops/gemm.h): a product the engine runs
// serially, outside any parallel region or inside an inactive one (how linear_grouped runs a lone
// small product), must not start threads. Left to itself oneDNN opened a nested OpenMP team for
// such a call, and libgomp starts a nested team's threads anew each time: a 16-row product took
// 3.5x as long. Counted by interposing pthread_create, in a binary of its own: sanitizers
// interpose it too, so this binary is not built with them.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <omp.h>
#include <pthread.h>

#include <atomic>
#include <vector>

#include "../unit/test_helpers.h"
#include "model/model.h"
#include "ops/gemm.h"
#include "ops/linear.h"
#include "ops/rope.h"
#include "util/parallel_for.h"

namespace {
std::atomic<int> g_started{0};
}  // namespace

extern "C" int pthread_create(pthread_t* t, const pthread_attr_t* a, void* (*f)(void*), void* arg) {
  using Fn = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const Fn real = reinterpret_cast<Fn>(dlsym(RTLD_NEXT, "pthread_create"));
  ++g_started;
  return real(t, a, f, arg);
}

namespace dllmq {
namespace {

class LibraryThreads : public ::testing::TestWithParam<GemmLib> {
 protected:
  void SetUp() override {
    if (omp_get_max_threads() < 2) GTEST_SKIP() << "needs OMP_NUM_THREADS >= 2";
    if (!gemm_available(GetParam())) GTEST_SKIP() << gemm_lib_name(GetParam()) << " not built";
    saved_ = gemm_info().lib;
    gemm_select(GetParam());
    // The engine's own team exists from here on (libgomp keeps its threads).
#pragma omp parallel
    { (void)omp_get_thread_num(); }
  }
  void TearDown() override {
    gemm_select(saved_);
  }
  GemmLib saved_ = GemmLib::kOpenBlas;
};

TEST_P(LibraryThreads, SerialProductsStartNoThreads) {
  const int threads = omp_get_max_threads();
  std::vector<float> wv(256 * 256);
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = 0.01f * float(int(i % 97) - 48);
  const test_util::OwnedTensor w(wv, {256, 256}, DType::kBF16);
  const Linear l{&w.t, nullptr, 256, 256};
  std::vector<float> x(16 * 256, 0.5f), y(16 * 256), a(16 * 64, 0.25f), c(16 * 16);
  for (ComputeDType dt : {ComputeDType::kF32, ComputeDType::kBF16})
    linear(x.data(), 16, l, y.data(), 0, dt);  // first calls: kernels, scratch
  const int before = g_started.load();
  for (int i = 0; i < 10; ++i) {
    for (ComputeDType dt : {ComputeDType::kF32, ComputeDType::kBF16})
      linear(x.data(), 16, l, y.data(), 0, dt);
    sgemm(true, 16, 16, 64, 1.0f, a.data(), 64, a.data(), 64, 0.0f, c.data(), 16);
#pragma omp parallel if (false)
    {
      sgemm_nt(16, 16, 64, a.data(), 64, a.data(), 64, c.data(), 16);
      sgemm(false, 16, 16, 16, 1.0f, a.data(), 64, a.data(), 64, 0.0f, c.data(), 16);
    }
  }
  EXPECT_EQ(g_started.load(), before)
      << "threads started by serial products on " << gemm_info().name;
  EXPECT_EQ(omp_get_max_threads(), threads) << "the thread count was not restored";
}

INSTANTIATE_TEST_SUITE_P(Libraries, LibraryThreads,
                         ::testing::Values(GemmLib::kOneDnn, GemmLib::kOpenBlas),
                         [](const auto& info) { return std::string(gemm_lib_name(info.param)); });

// The engine's own regions inside a loop over canvases (util/parallel_for.h): with one canvas the
// loop runs at top level, so RoPE's region takes the process's pool. The control shows why: the
// same region inside an inactive `parallel for if (false)` starts a nested team's threads.
TEST(EngineRegions, ALoopRunAloneLeavesInnerRegionsOnThePool) {
  if (omp_get_max_threads() < 2) GTEST_SKIP() << "needs OMP_NUM_THREADS >= 2";
#pragma omp parallel
  { (void)omp_get_thread_num(); }
  RopeTable rope(64, 10000.0);
  rope.reserve(512);
  std::vector<float> x(size_t(512) * 8 * 64, 0.5f);  // 262,144 values: RoPE splits them
  int level = -1;
  const int before = g_started.load();
  for (int i = 0; i < 10; ++i)
    for_each_item(1, false, [&](size_t) {
      level = omp_get_level();
      rope.apply(x.data(), 512, 8, 0);
    });
  EXPECT_EQ(level, 0) << "a loop run alone opened a region";
  EXPECT_EQ(g_started.load(), before) << "threads started under a loop run alone";
  // The control: libgomp starts the nested team's threads (here, each time).
  const int control = g_started.load();
  for (int i = 0; i < 10; ++i) {
    const bool par = false;
#pragma omp parallel for if (par)
    for (int c = 0; c < 1; ++c) rope.apply(x.data(), 512, 8, 0);
  }
  EXPECT_GT(g_started.load(), control)
      << "libgomp no longer starts threads for a region nested "
         "in an inactive one: util/parallel_for.h's reason is gone";
}

// A forward of one canvas, as the decoders run it, starts no thread once the pool exists.
TEST(EngineRegions, AForwardStartsNoThreads) {
  if (omp_get_max_threads() < 2) GTEST_SKIP() << "needs OMP_NUM_THREADS >= 2";
  std::unique_ptr<Model> m = Model::load(DLLMQ_SOURCE_DIR "/models/dllmq-synth-tiny");
  const int n = 512;  // RoPE over 512 x 256 values and the norms split over the threads
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = (i * 37) % m->config().vocab_size;
  ForwardArgs a;
  a.ids = ids;
  a.logits = {n - 32, n};
  std::vector<float> logits(size_t(32) * m->config().vocab_size);
  m->forward(a, logits.data());  // first call: scratch, kernels
  const int before = g_started.load();
  for (int i = 0; i < 5; ++i) m->forward(a, logits.data());
  EXPECT_EQ(g_started.load(), before) << "a forward started threads";
}

}  // namespace
}  // namespace dllmq
