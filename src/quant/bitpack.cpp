#include "quant/bitpack.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "quant/dequant_isa.h"
#include "quant/dequant_kernel.h"
#include "quant/uniform.h"
#include "util/error.h"

namespace dllmq {
namespace {

// Codes per chunk of the b = 3 bit stream in the scalar kernel: 64 * 3 bits = 24 whole bytes.
constexpr int kBits3Block = 64;
// The largest chunk: 16 bytes of 2-bit codes.
constexpr int kMaxChunkCodes = 64;

void check_bits(const char* what, int bits) {
  if (!valid_quant_bits(bits)) fail("{}: unsupported bits {} (2, 3, 4 or 8)", what, bits);
}

// Codes of one plane-split chunk (m codes, w bytes wide) into codes[0..m).
void unpack_chunk(const uint8_t* p, int m, int w, int bits, uint8_t* codes) {
  const int k = 8 / bits;
  const unsigned mask = (1u << bits) - 1;
  for (int i = 0; i < k; ++i) {
    const int lim = std::min(w, m - i * w);
    for (int j = 0; j < lim; ++j) codes[i * w + j] = (p[j] >> (bits * i)) & mask;
  }
}

// Codes [0, m) of a 3-bit stream that starts at a byte boundary.
void unpack_bits3(const uint8_t* p, int m, uint8_t* codes) {
  for (int i = 0; i < m; ++i) {
    const int bit = 3 * i;
    unsigned v = p[bit >> 3];
    if ((bit & 7) > 5) v |= static_cast<unsigned>(p[(bit >> 3) + 1]) << 8;
    codes[i] = (v >> (bit & 7)) & 7u;
  }
}

// ---- scalar ------------------------------------------------------------------------------------

// The reference formula every SIMD path must reproduce bit for bit:
//   uniform: fma(code, a[g], b[g]);  lut: fma(lut[code], a[g], b[g]);  g = c / group.
template <bool kLut>
void apply_scalar(const uint8_t* codes, int c0, int m, const float* lut, const float* a,
                  const float* b, int group, float* out) {
  // The group index advances with a running boundary instead of a division per element.
  int g = c0 / group;
  int next = (g + 1) * group;
  for (int t = 0; t < m; ++t) {
    const int c = c0 + t;
    if (c == next) {
      ++g;
      next += group;
    }
    const float v = kLut ? lut[codes[t]] : static_cast<float>(codes[t]);
    out[c] = std::fmaf(v, a[g], b[g]);
  }
}

// One plane-split chunk (codes s .. s + m, w bytes at p) through the scalar formula.
template <bool kLut>
void chunk_scalar(const uint8_t* p, int s, int m, int w, int bits, const float* lut, const float* a,
                  const float* b, int group, float* out) {
  uint8_t codes[kMaxChunkCodes];
  unpack_chunk(p, m, w, bits, codes);
  apply_scalar<kLut>(codes, s, m, lut, a, b, group, out);
}

// The codes of plane i of a chunk whose plane run is only partly filled.
template <bool kLut>
void plane_scalar(const uint8_t* p, int c0, int valid, int shift, int bits, const float* lut,
                  const float* a, const float* b, int group, float* out) {
  uint8_t codes[16];
  const unsigned mask = (1u << bits) - 1;
  for (int j = 0; j < valid; ++j) codes[j] = (p[j] >> shift) & mask;
  apply_scalar<kLut>(codes, c0, valid, lut, a, b, group, out);
}

template <bool kLut>
void dequant_scalar(const uint8_t* packed, int n, int bits, const float* lut, const float* a,
                    const float* b, int group, float* out) {
  uint8_t codes[kMaxChunkCodes];
  if (bits == 3) {
    for (int s = 0; s < n; s += kBits3Block) {
      const int m = std::min(kBits3Block, n - s);
      unpack_bits3(packed + s / 8 * 3, m, codes);
      apply_scalar<kLut>(codes, s, m, lut, a, b, group, out);
    }
    return;
  }
  const int k = 8 / bits;
  const uint8_t* p = packed;
  for (int s = 0; s < n; s += 16 * k) {
    const int m = std::min(16 * k, n - s);
    const int w = (m + k - 1) / k;
    chunk_scalar<kLut>(p, s, m, w, bits, lut, a, b, group, out);
    p += w;
  }
}

// ---- dispatch
// ------------------------------------------------------------------------------------

// Runs the kernel of `isa` (which the caller has checked the CPU supports). The SIMD kernels are
// compiled per instruction set from one source (dequant_kernel_impl.h).
template <bool kLut>
void dequant_row(Isa isa, const uint8_t* packed, int n, int bits, const float* lut, const float* a,
                 const float* b, int group, float* out) {
  if (isa == Isa::kScalar || bits == 3)
    dequant_scalar<kLut>(packed, n, bits, lut, a, b, group, out);
  else if (isa == Isa::kAvx512)
    kern::dequant_kernel_avx512(kLut, bits)(packed, n, lut, a, b, group, out);
  else
    kern::dequant_kernel_avx2(kLut, bits)(packed, n, lut, a, b, group, out);
}

// DLLMQ_QUANT_ISA (kept from before the shared switch) overrides DLLMQ_ISA for the dequantization
// kernels alone; otherwise they follow the engine's dispatch (util/cpu_isa.h).
Isa select_isa() {
  const char* env = std::getenv("DLLMQ_QUANT_ISA");
  if (env != nullptr && *env != '\0') return parse_isa("DLLMQ_QUANT_ISA", env);
  return dispatch_isa();
}

// Chosen on first use; a bad DLLMQ_QUANT_ISA throws on every call since the static stays unset.
Isa active_isa() {
  static const Isa isa = select_isa();
  return isa;
}

void check_dequant_args(const char* what, int n, int bits, int group) {
  check_bits(what, bits);
  if (n < 0) fail("{}: negative row length {}", what, n);
  if (group < 1) fail("{}: group {} must be >= 1", what, group);
}

}  // namespace

namespace kern {

// fn(std::true_type or std::false_type): the kLut instantiation chosen at run time.
template <class Fn>
void with_lut(bool lut, Fn&& fn) {
  if (lut)
    fn(std::true_type{});
  else
    fn(std::false_type{});
}

void dequant_chunk_scalar(bool lut, const uint8_t* p, int s, int m, int w, int bits,
                          const float* table, const float* a, const float* b, int group,
                          float* out) {
  with_lut(lut, [&](auto k) {
    chunk_scalar<decltype(k)::value>(p, s, m, w, bits, table, a, b, group, out);
  });
}

void dequant_plane_scalar(bool lut, const uint8_t* p, int c0, int valid, int shift, int bits,
                          const float* table, const float* a, const float* b, int group,
                          float* out) {
  with_lut(lut, [&](auto k) {
    plane_scalar<decltype(k)::value>(p, c0, valid, shift, bits, table, a, b, group, out);
  });
}

}  // namespace kern

size_t packed_row_bytes(int n, int bits) {
  return (static_cast<size_t>(n) * static_cast<size_t>(bits) + 7) / 8;
}

void pack_codes(const uint8_t* codes, int n, int bits, uint8_t* packed) {
  check_bits("pack_codes", bits);
  if (n < 0) fail("pack_codes: negative row length {}", n);
  const unsigned mask = (1u << bits) - 1;
  if (bits == 3) {
    std::memset(packed, 0, packed_row_bytes(n, bits));
    for (int i = 0; i < n; ++i) {
      assert(codes[i] <= mask);
      const int bit = 3 * i;
      const unsigned v = (codes[i] & mask) << (bit & 7);
      packed[bit >> 3] |= static_cast<uint8_t>(v);
      if ((bit & 7) > 5) packed[(bit >> 3) + 1] |= static_cast<uint8_t>(v >> 8);
    }
    return;
  }
  const int k = 8 / bits;
  uint8_t* p = packed;
  for (int s = 0; s < n; s += 16 * k) {
    const int m = std::min(16 * k, n - s);
    const int w = (m + k - 1) / k;
    for (int j = 0; j < w; ++j) {
      unsigned byte = 0;
      for (int i = 0; i < k && i * w + j < m; ++i) {
        assert(codes[s + i * w + j] <= mask);
        byte |= (codes[s + i * w + j] & mask) << (bits * i);
      }
      p[j] = static_cast<uint8_t>(byte);
    }
    p += w;
  }
}

void unpack_codes(const uint8_t* packed, int n, int bits, uint8_t* codes) {
  check_bits("unpack_codes", bits);
  if (n < 0) fail("unpack_codes: negative row length {}", n);
  if (bits == 3) {
    unpack_bits3(packed, n, codes);
    return;
  }
  const int k = 8 / bits;
  const uint8_t* p = packed;
  for (int s = 0; s < n; s += 16 * k) {
    const int m = std::min(16 * k, n - s);
    const int w = (m + k - 1) / k;
    unpack_chunk(p, m, w, bits, codes + s);
    p += w;
  }
}

void dequant_uniform_row_isa(Isa isa, const uint8_t* packed, int n, int bits, const float* scale,
                             const float* zero, int group, float* out) {
  check_dequant_args("dequant_uniform_row", n, bits, group);
  if (!isa_available(isa)) fail("dequant_uniform_row: this CPU does not support {}", isa_name(isa));
  dequant_row<false>(isa, packed, n, bits, nullptr, scale, zero, group, out);
}

void dequant_lut_row_isa(Isa isa, const uint8_t* packed, int n, int bits, const float* lut,
                         const float* range, const float* offset, int group, float* out) {
  check_dequant_args("dequant_lut_row", n, bits, group);
  if (!isa_available(isa)) fail("dequant_lut_row: this CPU does not support {}", isa_name(isa));
  dequant_row<true>(isa, packed, n, bits, lut, range, offset, group, out);
}

void dequant_uniform_row(const uint8_t* packed, int n, int bits, const float* scale,
                         const float* zero, int group, float* out) {
  const Isa isa = active_isa();
  check_dequant_args("dequant_uniform_row", n, bits, group);
  dequant_row<false>(isa, packed, n, bits, nullptr, scale, zero, group, out);
}

void dequant_lut_row(const uint8_t* packed, int n, int bits, const float* lut, const float* range,
                     const float* offset, int group, float* out) {
  const Isa isa = active_isa();
  check_dequant_args("dequant_lut_row", n, bits, group);
  dequant_row<true>(isa, packed, n, bits, lut, range, offset, group, out);
}

const char* quant_isa() {
  return isa_name(active_isa());
}

}  // namespace dllmq
