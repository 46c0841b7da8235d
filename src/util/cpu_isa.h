// The vector instruction sets the hand-written kernels are compiled for, and the one a process
// runs, chosen at run time from CPUID: one binary serves every x86-64 CPU, from one without AVX2
// (scalar kernels) to one with AVX-512. The kernels of each set live in translation units of
// their own, compiled with that set's target flags (CMakeLists.txt); everything else is built for
// the portable base (-march=x86-64-v2 by default).
#pragma once

namespace dllmq {

enum class Isa { kScalar, kAvx2, kAvx512 };

// Whether this CPU (and OS) can run `isa`'s kernels. kScalar is always available.
// kAvx2: AVX2 + FMA + F16C. kAvx512: AVX-512 F/BW/VL/DQ + FMA + F16C.
bool isa_available(Isa isa);
// "scalar" | "avx2" | "avx512".
const char* isa_name(Isa isa);
// Parses `value` of the environment variable `var` ("scalar", "avx2", "avx512"); throws
// dllmq::Error naming the variable and the accepted values, or saying that the CPU lacks it.
Isa parse_isa(const char* var, const char* value);
// The best set this CPU has.
Isa best_isa();
// The set the kernels run: DLLMQ_ISA=scalar|avx2|avx512 forces one (so CI exercises every path
// its CPU has), else best_isa(). Read once; a bad value throws on every call.
Isa dispatch_isa();
// Whether the CPU has the AVX512-BF16 dot product (vdpbf16ps), reported by inspect/bench.
bool cpu_has_avx512_bf16();

}  // namespace dllmq
