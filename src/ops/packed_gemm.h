// Projection weights packed once, at load, into the layout the micro-kernels stream, and the
// product over them: y = x W^T with f32 activations and the weights in their stored dtype (bf16,
// f16 or f32), widened in registers, f32 FMA, one accumulation chain per output in ascending k.
//
// Layout: W [n, k] is cut into panels of 2 * lanes columns (16 for AVX2 and the scalar kernels,
// 32 for AVX-512; the last panel padded with zeros); each panel holds its columns' weights
// k-major (for each k, its 2 * lanes weights next to each other) in the stored dtype, so the
// packed copy has the checkpoint's bytes (plus the padding). Within a k row, bf16 interleaves the
// panel's two halves (slot 2i = column i, slot 2i + 1 = column lanes + i) so that one load widens
// to two f32 vectors with a shift and a mask (ops/packed_kernel_impl.h).
//
// Integer codes (wquant/weight_quant.h, bits 8 or 4): a panel's k row holds its columns' codes
// (bytes, or nibbles: byte i = column i | column lanes + i << 4), the k rows in the reduction
// order (input columns sorted by group, reduction_order()), and per panel and group the f32
// scales and int32 zero points of its columns. When every zero point is 2^(bits - 1) (the
// symmetric scheme) the codes are stored as q - z, signed, and there is no zero table. The
// activations are gathered into that order first when it is not ascending k (desc_act).
//
// Bits: every output is fmaf(x[k], w[k], acc) for k = 0, 1, ..., k - 1 from acc = 0, on every
// instruction set, row count, tiling and thread split; gemm_fma_ref is that loop written plainly
// on the unpacked weights, and tests demand equality. Codes: per group a chain of
// fmaf(x[k], float(q - z), a) over the group's run from a = 0, then acc = fmaf(a, s, acc) over the
// groups in order from 0 (quant_gemm_ref): the scale leaves the inner loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "io/dtype.h"
#include "ops/packed_kernel.h"
#include "util/cpu_isa.h"
#include "wquant/weight_quant.h"

namespace dllmq {

struct PackedWeight {
  DType dtype = DType::kF32;  // float weights: their stored dtype
  int bits = 0;               // 0: float weights; 8 or 4: integer codes
  int n = 0, k = 0;
  Isa isa = Isa::kScalar;  // the kernels it was packed for (their vector width sets the layout)
  int lanes = 8;           // floats per vector of the layout: panels of 2 * lanes columns
  int panels() const { return (n + 2 * lanes - 1) / (2 * lanes); }
  // AMX layout (ops/amx_gemm.h) instead of the panels above: bf16 tiles of 32 columns x 32 k,
  // k padded with zeros to k_pad, a multiple of 32. Only bf16 compute multiplies it.
  bool amx = false;
  int k_pad = 0;
  // Bytes of the panels (codes, or weights in `dtype`), group tables included.
  size_t bytes() const {
    if (amx) return size_t(panels()) * 2 * lanes * size_t(k_pad) * 2;
    const size_t per_k = bits ? size_t(2 * lanes) * bits / 8 : 2 * lanes * dtype_size(dtype);
    return size_t(panels()) * per_k * size_t(k) + (scale.size() + zero.size()) * 4;
  }
  const void* data() const { return buf.get(); }

  // Integer codes only (see above).
  int n_groups = 0;
  std::vector<float> scale;     // [panels][n_groups][2 * lanes]
  std::vector<int32_t> zero;    // [panels][n_groups][2 * lanes]; empty with signed codes
  bool signed_codes = false;    // codes stored as q - z (every z was 2^(bits - 1))
  std::vector<int32_t> gstart;  // [n_groups + 1]: where each group's run begins in the order
  std::vector<int32_t> order;   // the reduction order (input column of each packed k); empty
                                // when it is 0, 1, ..., k - 1

  struct Free {
    void operator()(void* p) const;
  };
  std::unique_ptr<uint8_t, Free> buf;  // 64-byte aligned
};

// Floats per vector of `isa`'s layout (16 for AVX-512, else 8).
int isa_lanes(Isa isa);

// Packs w [n, k] (row-major, `dt`) for `isa`'s kernels; panels packed on the OpenMP threads when
// `parallel`.
std::shared_ptr<const PackedWeight> pack_weight(const void* w, DType dt, int n, int k, Isa isa,
                                                bool parallel = true);

// Packs integer codes for `isa`'s kernels (layout above).
std::shared_ptr<const PackedWeight> pack_quant_weight(const QuantMatrix& m, Isa isa,
                                                      bool parallel = true);

// Panels [p0, p1) of `w` applied to every block (for codes with a reduction order, the blocks'
// x must already be gathered into it: gather_reduction_order) (y columns of those panels only,
// overwritten). `round_w`: round each widened weight to bf16 first (bf16 compute on f32/f16
// weights; codes need none). `scalar`: run the portable kernel on the same packed data instead of
// `w.isa`'s (the twin). `k_block`: reduction values per K block, 0 for the kernels' own rule;
// tests and benchmarks set it, to pause every chain in y at chosen places or to compare lengths
// (the bits do not depend on it). `panel_group`: panels per group, 0 for the kernels' own rule
// (tests and benchmarks set it; the bits do not depend on it either). Runs on the calling thread.
void packed_gemm(const PackedWeight& w, std::span<const kern::Block> blocks, int p0, int p1,
                 bool round_w, bool scalar = false, int k_block = 0, int panel_group = 0);

// The definition, plainly: y[i, c] = fmaf chain over ascending k of x[i, k] * w[c, k] (widened
// from `dt`, bf16-rounded first when `round_w`), from 0. w: the unpacked [n, k] weights.
void gemm_fma_ref(const float* x, int m, int ldx, const void* w, DType dt, int n, int k,
                  bool round_w, float* y, int ldy);

// bf16 compute's other kernel, on CPUs with AVX512-BF16 where the start-up measurement chose it
// (ops/gemm.h, bf16_dot): bf16 weights packed for AVX-512 (the same panels), multiplied by the
// dot-product instruction, two k at a time. Whether `w` can run on it:
bool bf16dot_available(const PackedWeight& w);
// Panels [p0, p1) of `w` applied to every block, like packed_gemm; x is rounded to bf16 by the
// kernel. Its bits are gemm_bf16dot_ref's. Requires bf16dot_available(w).
void packed_gemm_bf16dot(const PackedWeight& w, std::span<const kern::Block> blocks, int p0,
                         int p1);
// The definition, the instruction emulated (its twin): y[i, c] = a chain over the k pairs in
// ascending order from 0, acc = fmaf(x'[k+1], w[k+1], acc) then acc = fmaf(x'[k], w[k], acc),
// where x' is x rounded to bf16 (nearest even) and the last pair of an odd k is (x'[k-1], 0); a
// denormal input (x, w or acc) reads as zero and a denormal result is flushed to zero, as
// vdpbf16ps does. w: the unpacked [n, k] bf16 weights.
void gemm_bf16dot_ref(const float* x, int m, int ldx, const uint16_t* w, int n, int k, float* y,
                      int ldy);

// Codes only: q - z of output column c at packed position kp (its group g), with that zero point
// in *z (2^(bits - 1) for signed codes): the one reader of a code from the panels.
inline int packed_code(const PackedWeight& w, int c, int kp, int g, int32_t* z) {
  const int nr = 2 * w.lanes, p = c / nr, s = c % nr;
  const size_t row_bytes = size_t(nr) * w.bits / 8;
  const auto* b = static_cast<const uint8_t*>(w.data()) + (size_t(p) * w.k + kp) * row_bytes;
  if (w.signed_codes) {
    *z = 1 << (w.bits - 1);
    if (w.bits == 8) return int8_t(b[s]);
    // a nibble: moved to the top of a byte, then shifted down arithmetically
    return int8_t(s < w.lanes ? uint8_t(b[s] << 4) : b[s - w.lanes]) >> 4;
  }
  *z = w.zero[(size_t(p) * w.n_groups + g) * nr + s];
  const int q = w.bits == 8 ? b[s] : s < w.lanes ? (b[s] & 15) : (b[s - w.lanes] >> 4);
  return q - *z;
}

// Codes only: the weights W[r0 .. r0 + rows, c0 .. c0 + cols] (original column order) as
// float(q - z) * s, into dst (row stride ldd). For code that needs a weight in floats rather
// than in a product (the KV gradient's W^T products of calibration).
void dequant_packed(const PackedWeight& w, int r0, int rows, int c0, int cols, float* dst,
                    ptrdiff_t ldd);

// x [m, k] (row stride ldx) with its columns put in w's reduction order, into dst [m, k].
void gather_reduction_order(const PackedWeight& w, const float* x, int m, ptrdiff_t ldx,
                            float* dst);

// The definition for codes: y[i, c] = fmaf chain over the groups g (in order) of a_g * s[g, c]
// from 0, where a_g = fmaf chain, over the group's input columns in reduction_order(m), of
// x[i, kk] * float(q[c, kk] - z[g, c]) from 0. (bf16 compute changes nothing here: q - z is exact
// in bf16, and the activations are rounded by the caller.)
void quant_gemm_ref(const float* x, int m, int ldx, const QuantMatrix& q, float* y, int ldy);

// One core's f32 FMA rate in GFLOP/s on `isa`'s vectors (independent chains, no memory), best of
// repeats lasting `min_s` seconds in all; 0 for kScalar.
double measure_fma_peak_gflops(Isa isa, double min_s = 0.2);
// The same for the bf16 dot product (vdpbf16ps; a multiply-add is 2 FLOPs); 0 without AVX512-BF16.
double measure_bf16dot_peak_gflops(double min_s = 0.2);

}  // namespace dllmq
