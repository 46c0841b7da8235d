#include "ops/int8_act_gemm.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/int8_act_kernel.h"
#include "ops/packed_gemm.h"
#include "ops/panel_split.h"
#include "util/cpu_features.h"
#include "util/cpu_isa.h"
#include "util/error.h"
#include "wquant/weight_quant.h"

namespace dllmq {

namespace {

constexpr int kC = kern::kI8Cols;

// Longest group whose sums stay inside int32: the u8 sum (<= 255 * |code| per k) and the
// corrections (128 * |code| and, 4 bits, 15 * 127 per k) together, 511 * |code| per k.
int max_group(int bits) {
  const int64_t code = bits == 8 ? 128 : 15;
  return int(std::numeric_limits<int32_t>::max() / (511 * code));
}

// Quantizes the rows of one block into the packed positions: u8 codes + 128 (padding 128), row
// scales and, for 4-bit weights, the per-group sums of the int8 codes.
struct QuantRows {
  std::vector<uint8_t> xq;
  std::vector<float> sx;
  std::vector<int32_t> xsum;
};

void quantize_rows(const Int8ActWeight& w, const kern::Block& b, bool scalar, QuantRows& out) {
  out.xq.assign(size_t(b.m) * w.kp, 128);
  out.sx.resize(b.m);
  out.xsum.assign(size_t(b.m) * w.n_groups, 0);
  if (w.identity) {
    // Packed position p is input column p: each row straight into place, vectorized where the
    // CPU allows (same bytes either way); the group sums only where a zero point needs them.
    const bool vec = !scalar && int8_act_vnni();
    for (int i = 0; i < b.m; ++i) {
      uint8_t* d = out.xq.data() + size_t(i) * w.kp;
      out.sx[i] = vec ? kern::quantize_row_u8_avx512(b.x + i * b.ldx, w.k, d)
                      : kern::quantize_row_u8_scalar(b.x + i * b.ldx, w.k, d);
      if (w.zero.empty()) continue;
      for (int g = 0; g < w.n_groups; ++g) {
        int32_t sum = 0;
        for (int p = w.gstart[g]; p < w.gstart[g + 1]; ++p) sum += int32_t(d[p]) - 128;
        out.xsum[size_t(i) * w.n_groups + g] = sum;
      }
    }
    return;
  }
  std::vector<int8_t> row(w.k);
  for (int i = 0; i < b.m; ++i) {
    out.sx[i] = quantize_act_row(b.x + i * b.ldx, w.k, row.data());
    uint8_t* d = out.xq.data() + size_t(i) * w.kp;
    for (int g = 0; g < w.n_groups; ++g) {
      int32_t sum = 0;
      for (int p = w.gstart[g]; p < w.gstart[g + 1]; ++p) {
        const int kk = w.src[p];
        if (kk < 0) continue;
        d[p] = uint8_t(row[kk] + 128);
        sum += row[kk];
      }
      out.xsum[size_t(i) * w.n_groups + g] = sum;
    }
  }
}

}  // namespace

size_t Int8ActWeight::bytes() const {
  return codes.size() + scale.size() * sizeof(float) + corr.size() * sizeof(int32_t) +
         zero.size() * sizeof(int32_t) + src.size() * sizeof(int32_t);
}

bool int8_act_eligible(const PackedWeight& w, std::string* why) {
  auto no = [&](std::string s) {
    if (why) *why = std::move(s);
    return false;
  };
  if (w.bits != 8 && w.bits != 4) return no("not integer codes");
  for (int g = 0; g < w.n_groups; ++g)
    if (w.gstart[g + 1] - w.gstart[g] > max_group(w.bits))
      return no(fmt::format("a group of {} input columns (int32 sums allow {})",
                            w.gstart[g + 1] - w.gstart[g], max_group(w.bits)));
  return true;
}

std::shared_ptr<const Int8ActWeight> pack_int8_act(const PackedWeight& w) {
  std::string why;
  if (!int8_act_eligible(w, &why)) fail("int8 activations: the weight has {}", why);
  auto a = std::make_shared<Int8ActWeight>();
  a->bits = w.bits;
  a->n = w.n;
  a->k = w.k;
  a->n_groups = w.n_groups;
  const int G = w.n_groups;
  a->gstart.assign(G + 1, 0);
  for (int g = 0; g < G; ++g)
    a->gstart[g + 1] = a->gstart[g] + (w.gstart[g + 1] - w.gstart[g] + 7) / 8 * 8;
  a->kp = a->gstart[G];
  a->src.assign(a->kp, -1);
  for (int g = 0; g < G; ++g)
    for (int j = 0; j < w.gstart[g + 1] - w.gstart[g]; ++j) {
      const int kp = w.gstart[g] + j;
      a->src[a->gstart[g] + j] = w.order.empty() ? kp : w.order[kp];
    }
  a->identity = true;
  for (int p = 0; p < a->kp; ++p) a->identity = a->identity && a->src[p] == (p < w.k ? p : -1);
  const int panels = a->panels(), kp = a->kp;
  const size_t panel_bytes = size_t(kp) * 16 * a->bits / 8;  // 64 bytes per quad or octet
  a->codes.assign(size_t(panels) * panel_bytes, 0);
  a->scale.assign(size_t(panels) * G * kC, 0.0f);
  a->corr.assign(size_t(panels) * G * kC, 0);
  // Zero points: 4 bits (unsigned nibbles q), and 8-bit asymmetric codes (stored as q - 128,
  // zero point z - 128); 8-bit symmetric codes are q - z itself.
  const bool zeros = a->bits == 4 || !w.signed_codes;
  if (zeros) a->zero.assign(size_t(panels) * G * kC, 0);
#pragma omp parallel for schedule(static) if (panels > 1)
  for (int p = 0; p < panels; ++p) {
    uint8_t* d = a->codes.data() + size_t(p) * panel_bytes;
    for (int cc = 0; cc < kC; ++cc) {
      const int c = p * kC + cc;
      if (c >= w.n) continue;  // padding columns: codes, scale and corrections 0
      for (int g = 0; g < G; ++g) {
        const size_t t = (size_t(p) * G + g) * kC + cc;
        // The packed weight keeps the scales by its own panels: column c's scale of group g.
        const int nr = 2 * w.lanes;
        a->scale[t] = w.scale[(size_t(c / nr) * G + g) * nr + c % nr];
        int32_t sum = 0, z = 0;
        for (int j = 0; j < w.gstart[g + 1] - w.gstart[g]; ++j) {
          const int d_code = packed_code(w, c, w.gstart[g] + j, g, &z);
          const int pos = a->gstart[g] + j;
          // 8 bits sym: the signed q - z; 8 bits asym: q - 128 (a signed byte, z - 128 applied
          // by the epilogue); 4 bits: the unsigned nibble q (z applied by the epilogue)
          const int stored = a->bits == 4 ? d_code + z : zeros ? d_code + z - 128 : d_code;
          sum += stored;
          if (a->bits == 8) {
            d[size_t(pos / 4) * 64 + cc * 4 + pos % 4] = uint8_t(int8_t(stored));
          } else {
            uint8_t& byte = d[size_t(pos / 8) * 64 + cc * 4 + pos % 4];
            byte |= pos % 8 < 4 ? uint8_t(stored) : uint8_t(stored << 4);
          }
        }
        a->corr[t] = 128 * sum;
        if (zeros) a->zero[t] = a->bits == 4 ? z : z - 128;
      }
    }
  }
  return a;
}

bool int8_act_vnni() {
  static const bool v = dispatch_isa() == Isa::kAvx512 && cpu_features().avx512vnni;
  return v;
}

const char* int8_act_kernel_name() {
  return int8_act_vnni() ? "avx512_vnni" : "scalar";
}

float quantize_act_row(const float* x, int k, int8_t* xq) {
  // The portable quantizer (kern::quantize_row_u8_scalar) writes the codes + 128.
  thread_local std::vector<uint8_t> u8;
  u8.resize(size_t(std::max(k, 0)));
  const float sx = kern::quantize_row_u8_scalar(x, k, u8.data());
  for (int kk = 0; kk < k; ++kk) xq[kk] = int8_t(int(u8[kk]) - 128);
  return sx;
}

void int8_act_gemm(const Int8ActWeight& w, std::span<const kern::Block> blocks, int p0, int p1,
                   bool scalar) {
  if (p1 < 0) p1 = w.panels();
  thread_local QuantRows qr;
  for (const kern::Block& b : blocks) {
    if (b.m <= 0) continue;
    quantize_rows(w, b, scalar, qr);
    const kern::I8Args a{{qr.xq.data(), w.kp, qr.sx.data(), qr.xsum.data(), b.m, b.y, b.ldy},
                         w.codes.data(),
                         w.scale.data(),
                         w.corr.data(),
                         w.zero.empty() ? nullptr : w.zero.data(),
                         w.gstart.data(),
                         w.bits,
                         w.n,
                         w.kp,
                         w.n_groups,
                         p0,
                         p1};
    if (!scalar && int8_act_vnni())
      kern::i8gemm_vnni(a);
    else
      kern::i8gemm_scalar(a);
  }
}

void int8_act_gemm_parallel(const Int8ActWeight& w, std::span<const kern::Block> blocks) {
  int rows = 0;
  for (const kern::Block& b : blocks) rows += std::max(b.m, 0);
  // Each thread quantizes the rows it multiplies (a row's codes do not depend on who made them).
  run_panel_split(
      blocks, w.panels(), 2.0 * rows * double(w.n) * w.k,
      [&](std::span<const kern::Block> b, int p0, int p1) { int8_act_gemm(w, b, p0, p1); });
}

void int8_act_gemm_ref(const float* x, int m, int ldx, const QuantMatrix& q, float* y, int ldy) {
  const std::vector<int32_t> order = reduction_order(q);
  std::vector<int8_t> xq(q.k);
  for (int i = 0; i < m; ++i) {
    const float sx = quantize_act_row(x + size_t(i) * ldx, q.k, xq.data());
    for (int c = 0; c < q.n; ++c) {
      float acc = 0.0f;
      size_t kp = 0;
      for (int g = 0; g < q.n_groups; ++g) {
        int64_t s = 0;
        for (; kp < order.size() && q.g_idx[size_t(order[kp])] == g; ++kp) {
          const int kk = order[kp];
          s += int64_t(xq[kk]) * (int32_t(q.q[size_t(c) * q.k + kk]) - q.zero[size_t(g) * q.n + c]);
        }
        acc = std::fmaf(float(int32_t(s)) * q.scale[size_t(g) * q.n + c], sx, acc);
      }
      y[size_t(i) * ldy + c] = acc;
    }
  }
}

}  // namespace dllmq
