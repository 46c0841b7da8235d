// The dequantization kernel of plane-split code rows (quant/bitpack.h), written once for every
// vector width: instantiated by dequant_kernel_{avx2,avx512}.cpp with the traits class V of
// ops/simd_{avx2,avx512}.h (W floats per vector), each file compiled for its own instruction set.
// Include nothing here that portable code could also instantiate (see ops/packed_kernel_impl.h).
//
// A chunk of a row holds 16 * (8 / bits) codes in w <= 16 bytes: plane i (bits [bits * i,
// bits * (i + 1)) of each byte) holds codes i * w .. i * w + w - 1. Where w is a multiple of W,
// each plane is w / W vectors: W bytes widened to int32, shifted and masked into codes, converted
// (or looked up), then one FMA with the group's parameters, so each output is the scalar
// formula's fma(v, a[g], b[g]) bit for bit. Partly filled vectors (the row's last chunk) and
// chunks narrower than a vector go to the portable formula.
#pragma once

#include <cstring>

#include "quant/dequant_kernel.h"

namespace dllmq::kern {

namespace {  // internal linkage: each instruction set's file keeps its own copy

// c / group, by a shift where the group is a power of two (KIVI's 32, 64, 128): the division per
// vector showed among the hot instructions of an 8-bit row's profile (the measured gain was
// within the noise).
struct GroupIndex {
  int group, shift;
  explicit GroupIndex(int g)
      : group(g), shift((g & (g - 1)) == 0 ? __builtin_ctz(unsigned(g)) : -1) {}
  int operator()(int c) const { return shift >= 0 ? c >> shift : c / group; }
};

}  // namespace

// The parameters of the W outputs c .. c + W - 1 (c a multiple of W): per lane (group 1), one
// broadcast pair when they share a group, else gathered lane by lane.
template <class V>
inline __attribute__((always_inline)) void dequant_params(const float* a, const float* b,
                                                          const GroupIndex& gi, int n, int c,
                                                          typename V::R& va, typename V::R& vb) {
  constexpr int W = V::W;
  const int group = gi.group;
  if (group == 1) {
    va = V::load(a + c);
    vb = V::load(b + c);
    return;
  }
  if (group >= n) {
    va = V::bcast(a);
    vb = V::bcast(b);
    return;
  }
  const int g0 = gi(c);
  if (group % W == 0 || g0 == gi(c + W - 1)) {
    va = V::bcast(a + g0);
    vb = V::bcast(b + g0);
    return;
  }
  float ta[W], tb[W];
  for (int l = 0; l < W; ++l) {
    ta[l] = a[gi(c + l)];
    tb[l] = b[gi(c + l)];
  }
  va = V::load(ta);
  vb = V::load(tb);
}

// One chunk of kWidth bytes (a multiple of W; compile-time, so the plane and vector loops
// unroll with constant shifts): m codes from code s.
template <class V, bool kLut, int kBits, int kWidth>
inline __attribute__((always_inline)) void dequant_chunk(const uint8_t* p, int s, int m,
                                                         const float* lut,
                                                         const typename V::Table& t16,
                                                         const float* a, const float* b,
                                                         const GroupIndex& gi, int n, float* out) {
  using R = typename V::R;
  using RI = typename V::RI;
  constexpr int W = V::W;
  constexpr int J = kWidth / W;
  const RI mask = V::set1i((1 << kBits) - 1);
  RI raw[J];
#pragma GCC unroll 2
  for (int j = 0; j < J; ++j) raw[j] = V::widen_u8(p + j * W);
#pragma GCC unroll 4
  for (int i = 0; i < 8 / kBits; ++i) {
#pragma GCC unroll 2
    for (int j = 0; j < J; ++j) {
      const int c = s + i * kWidth + j * W;
      const int valid = m - i * kWidth - j * W;
      if (valid >= W) {
        const RI codes = kBits == 8 ? raw[j] : V::andi(V::srl(raw[j], kBits * i), mask);
        R va, vb;
        dequant_params<V>(a, b, gi, n, c, va, vb);
        R v;
        if constexpr (!kLut)
          v = V::cvt(codes);
        else if constexpr (kBits <= 4)
          v = V::lookup16(t16, codes, kBits);
        else
          v = V::gather(lut, codes);
        V::store(out + c, V::fma(v, va, vb));
      } else if (valid > 0) {
        dequant_plane_scalar(kLut, p + j * W, c, valid, kBits * i, kBits, lut, a, b, gi.group, out);
      }
    }
  }
}

// kBits is 2, 4 or 8 (b = 3 rows go to the portable kernel).
template <class V, bool kLut, int kBits>
void dequant_row(const uint8_t* packed, int n, const float* lut, const float* a, const float* b,
                 int group, float* out) {
  constexpr int W = V::W;
  constexpr int k = 8 / kBits;
  float table[16] = {};
  if (kLut && kBits <= 4) std::memcpy(table, lut, sizeof(float) << kBits);
  const typename V::Table t16 = V::table16(table);
  const GroupIndex gi(group);
  const uint8_t* p = packed;
  for (int s = 0; s < n; s += 16 * k) {
    const int m = n - s < 16 * k ? n - s : 16 * k;
    const int w = (m + k - 1) / k;
    if (w == 16)
      dequant_chunk<V, kLut, kBits, 16>(p, s, m, lut, t16, a, b, gi, n, out);
    else if (W <= 8 && w == 8)  // (the width is spelled so that W = 16 never instantiates 8)
      dequant_chunk<V, kLut, kBits, (W <= 8 ? 8 : W)>(p, s, m, lut, t16, a, b, gi, n, out);
    else
      dequant_chunk_scalar(kLut, p, s, m, w, kBits, lut, a, b, group, out);
    p += w;
  }
}

// The row kernel of (lut, bits) for bits 2, 4 and 8.
template <class V>
DequantRowFn dequant_kernel(bool lut, int bits) {
  if (bits == 2) return lut ? &dequant_row<V, true, 2> : &dequant_row<V, false, 2>;
  if (bits == 4) return lut ? &dequant_row<V, true, 4> : &dequant_row<V, false, 4>;
  return lut ? &dequant_row<V, true, 8> : &dequant_row<V, false, 8>;
}

}  // namespace dllmq::kern
