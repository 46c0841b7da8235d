#include "wquant/gptq_tensors.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/error.h"
#include "util/half.h"

namespace dllmq {

GptqTensors encode_gptq(const QuantMatrix& m, bool v1, const std::string& base) {
  const int b = m.bits, pf = 32 / b;
  const uint32_t mask = (1u << b) - 1;
  if (m.k % pf != 0 || m.n % pf != 0)
    fail(
        "{}: [{}, {}] cannot be packed {} codes per int32 (both dimensions must be multiples of "
        "{}); keep this tensor unquantized",
        base, m.n, m.k, pf, pf);
  GptqTensors t;
  t.qweight_shape = {m.k / pf, m.n};
  t.qweight.assign(size_t(m.k / pf) * m.n, 0);
  for (int i = 0; i < m.k / pf; ++i)
    for (int c = 0; c < m.n; ++c) {
      uint32_t word = 0;
      for (int j = 0; j < pf; ++j) word |= uint32_t(m.q[size_t(c) * m.k + i * pf + j]) << (b * j);
      t.qweight[size_t(i) * m.n + c] = int32_t(word);
    }
  t.qzeros_shape = {m.n_groups, m.n / pf};
  t.qzeros.assign(size_t(m.n_groups) * (m.n / pf), 0);
  const int off = v1 ? 1 : 0;
  for (int g = 0; g < m.n_groups; ++g)
    for (int i = 0; i < m.n / pf; ++i) {
      uint32_t word = 0;
      for (int j = 0; j < pf; ++j) {
        const int32_t z = m.zero[size_t(g) * m.n + i * pf + j] - off;
        if (z < 0 || uint32_t(z) > mask)
          fail("{}: zero point {} of group {} cannot be stored in the {} format", base, z + off, g,
               v1 ? "gptq (v1)" : "gptq_v2");
        word |= uint32_t(z) << (b * j);
      }
      t.qzeros[size_t(g) * (m.n / pf) + i] = int32_t(word);
    }
  t.scales_shape = {m.n_groups, m.n};
  t.scales.resize(m.scale.size());
  for (size_t i = 0; i < m.scale.size(); ++i) t.scales[i] = f32_to_f16(m.scale[i]);
  t.g_idx_shape = {m.k};
  t.g_idx = m.g_idx;
  return t;
}

std::vector<std::string> gptq_tensor_names(const std::string& base) {
  return {base + ".qweight", base + ".qzeros", base + ".scales", base + ".g_idx"};
}

namespace {

const TensorView& need(const Checkpoint& ckpt, const std::string& name, const char* why) {
  const TensorView* t = ckpt.find(name);
  if (t == nullptr)
    fail("{}: missing tensor '{}' of a GPTQ-quantized projection ({})", ckpt.dir(), name, why);
  return *t;
}

void check_tensor(const TensorView& t, std::initializer_list<DType> dts,
                  const std::vector<int64_t>& shape, const std::string& what) {
  bool ok = false;
  for (DType d : dts) ok = ok || t.dtype == d;
  if (!ok)
    fail("{}: tensor '{}' has dtype {}; a GPTQ {} must be {}", t.file, t.name, dtype_name(t.dtype),
         what, dtype_name(*dts.begin()));
  if (t.shape != shape)
    fail("{}: tensor '{}' has shape {} but the GPTQ layout expects [{}] ({})", t.file, t.name,
         t.shape_str(), fmt::join(shape, ", "), what);
}

}  // namespace

QuantMatrix decode_gptq(const Checkpoint& ckpt, const std::string& base, int n, int k,
                        const WeightQuantConfig& qc) {
  const int b = qc.scheme.bits, pf = 32 / b;
  const uint32_t mask = (1u << b) - 1;
  const TensorView& qw = need(ckpt, base + ".qweight", "packed codes");
  const TensorView& qz = need(ckpt, base + ".qzeros", "packed zero points");
  const TensorView& sc = need(ckpt, base + ".scales", "per-group scales");
  const TensorView& gi = need(ckpt, base + ".g_idx", "group of each input column");
  if (k % pf != 0 || n % pf != 0)
    fail(
        "{}: projection '{}' is [{}, {}]; {}-bit GPTQ packing needs both dimensions to be "
        "multiples of {}",
        ckpt.dir(), base, n, k, b, pf);
  const int G =
      qc.scheme.group_size == -1 ? 1 : (k + qc.scheme.group_size - 1) / qc.scheme.group_size;
  // With desc_act a group's columns are scattered, but there are still ceil(k / group_size).
  check_tensor(qw, {DType::kI32}, {k / pf, n},
               fmt::format("qweight of {}-bit codes, {} per int32 along k", b, pf));
  check_tensor(sc, {DType::kF16, DType::kBF16, DType::kF32}, {G, n},
               fmt::format("scales, one row per group of {}", qc.scheme.group_size));
  check_tensor(qz, {DType::kI32}, {G, n / pf},
               fmt::format("qzeros of {}-bit zero points, {} per int32 along n", b, pf));
  check_tensor(gi, {DType::kI32}, {k}, "g_idx, the group of each input column");
  QuantMatrix m;
  m.bits = b;
  m.n = n;
  m.k = k;
  m.n_groups = G;
  m.g_idx.resize(k);
  std::memcpy(m.g_idx.data(), gi.data, size_t(k) * 4);
  for (int kk = 0; kk < k; ++kk)
    if (m.g_idx[kk] < 0 || m.g_idx[kk] >= G)
      fail("{}: tensor '{}' entry {} is {}: expected a group in [0, {})", gi.file, gi.name, kk,
           m.g_idx[kk], G);
  // Words read through memcpy: mapped tensor data is aligned only to its offset in the file.
  const auto* qbytes = static_cast<const unsigned char*>(qw.data);
  auto word_at = [](const unsigned char* base, size_t i) {
    uint32_t w;
    std::memcpy(&w, base + 4 * i, 4);
    return w;
  };
  m.q.resize(size_t(n) * k);
  for (int i = 0; i < k / pf; ++i)
    for (int c = 0; c < n; ++c) {
      const uint32_t word = word_at(qbytes, size_t(i) * n + c);
      for (int j = 0; j < pf; ++j)
        m.q[size_t(c) * k + i * pf + j] = uint8_t((word >> (b * j)) & mask);
    }
  const auto* zbytes = static_cast<const unsigned char*>(qz.data);
  m.zero.resize(size_t(G) * n);
  const int32_t off = qc.v1 ? 1 : 0;
  for (int g = 0; g < G; ++g)
    for (int i = 0; i < n / pf; ++i) {
      const uint32_t word = word_at(zbytes, size_t(g) * (n / pf) + i);
      for (int j = 0; j < pf; ++j)
        m.zero[size_t(g) * n + i * pf + j] = int32_t((word >> (b * j)) & mask) + off;
    }
  m.scale.resize(size_t(G) * n);
  to_f32(sc.dtype, sc.data, m.scale.data(), m.scale.size());
  for (size_t i = 0; i < m.scale.size(); ++i)
    if (!std::isfinite(m.scale[i]))
      fail("{}: tensor '{}' holds a non-finite scale at [{}, {}]", sc.file, sc.name, i / n, i % n);
  return m;
}

}  // namespace dllmq
