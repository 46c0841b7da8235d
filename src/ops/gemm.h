// Row-major GEMM behind one interface. The library is chosen once, at first use, from what the
// CPU can run (its instruction set), never from a CPU-model table: Debian's OpenBLAS 0.3.21
// picks kernels by CPU model and silently falls back to SSE3 ("Prescott") ones on CPUs it does
// not know, 2.4x slower end to end. oneDNN JIT-compiles its kernels for the instruction set
// CPUID reports, so a new CPU gets its vector units. The choice and the instruction set the
// kernels dispatched to are reported (gemm_info()), and a generic path is said on stderr.
#pragma once

#include <cstdint>
#include <string>

namespace dllmq {

enum class GemmLib { kOneDnn, kOpenBlas };

struct GemmInfo {
  GemmLib lib = GemmLib::kOpenBlas;
  std::string name;      // "oneDNN 2.6.3" / "OpenBLAS 0.3.21"
  std::string isa;       // instruction set its kernels run: "avx2", "avx512_core_bf16", "Haswell"
  std::string cpu_isa;   // best vector ISA the CPU itself has (what a tuned library would use)
  bool generic = false;  // the kernels do not use the CPU's vector units (slow path)
  // bf16 compute multiplies bf16 x bf16 -> f32 on a JIT dot-product kernel (AVX512-BF16/AMX)
  // rather than widening the weights to f32: only where such a kernel exists and measured no
  // slower than widening on this machine (bf16_why says which and why).
  bool bf16_native = false;
  bool bf16_jit = false;  // such a kernel exists here (whether or not it is used)
  // bf16 compute runs the packed panels on our AVX512-BF16 dot-product kernel
  // (ops/packed_gemm.h, packed_gemm_bf16dot) rather than widening them: only where the CPU has
  // the instruction and it measured faster (bf16_why). Never together with bf16_native.
  bool bf16_dot = false;
  // bf16 compute runs on AMX tiles (ops/amx_gemm.h, our kernel over weights repacked for it when
  // the model switches to bf16 compute): only where the CPU has AMX-BF16 and it measured
  // faster. Never together with bf16_native or bf16_dot.
  bool bf16_amx = false;
  std::string bf16_why;
  std::string why;  // one line: why this library was chosen
  // The projections' own kernels (ops/packed_gemm.h): the instruction set they run ("avx2"...)
  // and why (DLLMQ_ISA or the CPU's best). The library above runs the attention tiles, and the
  // bf16 products where bf16_native.
  std::string proj_isa;
  std::string proj_why;
};

// The backend in use (selected on first call; DLLMQ_GEMM=onednn|openblas forces one).
const GemmInfo& gemm_info();
// Forces a library (tests, benchmarks). Not thread-safe against running GEMMs.
void gemm_select(GemmLib lib);
// Forces bf16 compute's products native (where a bf16 JIT kernel exists) or widened to f32, as
// DLLMQ_BF16_GEMM does at start-up (tests, benchmarks). Returns whether native is in use now.
// Not thread-safe against running GEMMs.
bool gemm_set_bf16_native(bool native);
// Forces bf16 compute's products onto the AVX512-BF16 dot-product kernel (where the CPU has it)
// or back to widening, as DLLMQ_BF16_GEMM=dot|widened does. Returns whether it is in use now.
bool gemm_set_bf16_dot(bool dot);
// Forces bf16 compute's products onto the AMX kernel (where the CPU has it) or back to widening,
// as DLLMQ_BF16_GEMM=amx|widened does. Weights already packed keep their layout: a loaded model
// repacks when its compute dtype is set. Returns whether it is in use now.
bool gemm_set_bf16_amx(bool amx);
// Whether a library is compiled in (oneDNN is optional at build time).
bool gemm_available(GemmLib lib);
const char* gemm_lib_name(GemmLib lib);

// Threads of the engine's parallel regions (OpenMP), as reported next to the backend.
int gemm_threads();
// Binds each OpenMP thread to one CPU of the process's affinity mask (thread i -> i-th CPU) when
// there are at least as many CPUs as threads; DLLMQ_PIN=0 disables. Idempotent per thread count.
void pin_threads();
// Gives the calling thread back every CPU it could use before pin_threads() (threads started by
// a pinned thread inherit its single CPU: batched decoding's decoder threads call this first).
void unpin_this_thread();

// C[m, n] = alpha * A[m, k] * op(B) + beta * C. op(B) = B^T with B: [n, k] when trans_b, else
// B: [k, n]. All row-major with leading dimensions in elements. Runs on the calling thread,
// inside a parallel region or not; library threads are never started by it (the engine
// parallelises around GEMMs: small products pay more for a fork/join than they gain, and the
// libraries started a nested team of fresh threads for a call from an inactive region). So a
// product's bits do not depend on where it runs (tests/threads).
void sgemm(bool trans_b, int m, int n, int k, float alpha, const float* a, int lda, const float* b,
           int ldb, float beta, float* c, int ldc);

// C[m, n] = A[m, k] * B[n, k]^T in f32: the projections (B = weights). oneDNN's matmul primitive
// (cached per shape) where oneDNN is the backend, else cblas_sgemm. Same calling rules as sgemm.
void sgemm_nt(int m, int n, int k, const float* a, int lda, const float* b, int ldb, float* c,
              int ldc);

// C[m, n] = A[m, k] * B[n, k]^T, bf16 inputs (raw uint16 bit patterns), f32 accumulation and
// output. Only valid when gemm_info().bf16_native (oneDNN matmul on AVX512-BF16 / AMX).
void gemm_bf16_nt(int m, int n, int k, const uint16_t* a, int lda, const uint16_t* b, int ldb,
                  float* c, int ldc);

// The same through oneDNN whatever the backend (its reference kernel where no JIT one exists), so
// tests check the native path's numerics. False without oneDNN or where it has no bf16 matmul at
// all (oneDNN 2.x on CPUs without AVX-512).
bool gemm_bf16_nt_onednn(int m, int n, int k, const uint16_t* a, int lda, const uint16_t* b,
                         int ldb, float* c, int ldc);

// Scalar reference (double accumulation) for tests.
void sgemm_ref(bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
               const float* b, int ldb, float beta, float* c, int ldc);

}  // namespace dllmq
