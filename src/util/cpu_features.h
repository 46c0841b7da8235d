// What the CPU and the OS offer, read from CPUID and XGETBV once per process. One reader for the
// whole tree: the compilers' __builtin_cpu_supports names differ between GCC and clang versions
// (clang 14 knows no "f16c"), and it does not check that the OS saves the YMM/ZMM state.
#pragma once

namespace dllmq {

struct CpuFeatures {
  bool avx = false;  // AVX with the YMM state enabled by the OS
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;  // AVX-512 with the opmask/ZMM state enabled by the OS
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512bf16 = false;
  bool avx512vnni = false;  // vpdpbusd on 512-bit vectors
  // AMX tiles with bf16 products (tdpbf16ps), the OS saving the tile state (XCR0 bits 17-18).
  // Linux also wants each process to ask for the tile data state before its first tile
  // instruction (ops/amx_gemm.cpp does).
  bool amx_bf16 = false;
};

// The features of the CPU this process runs on (computed once, thread-safe).
const CpuFeatures& cpu_features();

}  // namespace dllmq
