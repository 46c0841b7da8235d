#include "cache/dense_kv_store.h"

#include <cassert>
#include <cstring>

#include <fmt/format.h>

#include "quant/outliers.h"
#include "util/half.h"
#include "util/half_rows.h"

namespace dllmq {

DenseKvStore::DenseKvStore(KvGeometry geo, DType dtype, const RopeTable& rope)
    : geo_(geo), dtype_(dtype), rope_(rope) {}

void DenseKvStore::reset(int n_positions) {
  if (n_positions > capacity_) {
    capacity_ = n_positions;
    const size_t n = size_t(geo_.n_layers) * geo_.kv_dim() * capacity_ * dtype_size(dtype_);
    // Not zeroed: pages never written (e.g. the suffix in prefix mode) are never touched.
    k_.reset(new uint8_t[n]);
    v_.reset(new uint8_t[n]);
  }
  held_.assign(capacity_, 0);
  rows_held_ = 0;
}

void DenseKvStore::store_row(uint8_t* dst, size_t off, const float* src) {
  const int hd = geo_.head_dim;
  switch (dtype_) {
    case DType::kF32:
      std::memcpy(dst + off * 4, src, size_t(hd) * 4);
      break;
    case DType::kF16:
      f32_to_f16_rows(src, reinterpret_cast<uint16_t*>(dst) + off, size_t(hd));
      break;
    case DType::kBF16: {
      auto* d = reinterpret_cast<uint16_t*>(dst) + off;
      for (int i = 0; i < hd; ++i) d[i] = f32_to_bf16(src[i]);
      break;
    }
    case DType::kI32:
      break;  // not a KV dtype (kv_spec accepts fp32/fp16/bf16 only)
  }
}

void DenseKvStore::write(int layer, int p0, int n, const float* k_pre, const float* v) {
  assert(p0 >= 0 && p0 + n <= capacity_);
  const int kvd = geo_.kv_dim(), hd = geo_.head_dim;
  check_finite(k_pre, size_t(n) * kvd, kvd, layer, p0, "K");
  check_finite(v, size_t(n) * kvd, kvd, layer, p0, "V");
  thread_local std::vector<float> rot;
  rot.resize(size_t(n) * kvd);
  std::memcpy(rot.data(), k_pre, rot.size() * 4);
  rope_.apply(rot.data(), n, geo_.n_kv_heads, p0);
  const float* kr = rot.data();  // inside the region `rot` names each worker's own (empty) copy
#pragma omp parallel for collapse(2) schedule(static) if (size_t(n) * kvd > 65536)
  for (int g = 0; g < geo_.n_kv_heads; ++g)
    for (int r = 0; r < n; ++r) {
      const size_t off = offset(layer, g, p0 + r);
      store_row(k_.get(), off, kr + size_t(r) * kvd + size_t(g) * hd);
      store_row(v_.get(), off, v + size_t(r) * kvd + size_t(g) * hd);
    }
  if (layer == 0)
    for (int p = p0; p < p0 + n; ++p)
      if (!held_[p]) {
        held_[p] = 1;
        ++rows_held_;
      }
}

KvRows DenseKvStore::read(int layer, int g, int p0, int n, float* ks, float* vs) const {
  const int hd = geo_.head_dim;
  const size_t off = offset(layer, g, p0);
  if (dtype_ == DType::kF32) {
    return {reinterpret_cast<const float*>(k_.get()) + off,
            reinterpret_cast<const float*>(v_.get()) + off, hd, n};
  }
  to_f32(dtype_, k_.get() + off * 2, ks, size_t(n) * hd);
  to_f32(dtype_, v_.get() + off * 2, vs, size_t(n) * hd);
  return {ks, vs, hd, n};
}

KvRowsBf16 DenseKvStore::read_bf16(int layer, int g, int p0, int n) const {
  (void)n;
  if (dtype_ != DType::kBF16) return {};
  const size_t off = offset(layer, g, p0);
  return {reinterpret_cast<const uint16_t*>(k_.get()) + off,
          reinterpret_cast<const uint16_t*>(v_.get()) + off, geo_.head_dim};
}

int DenseKvStore::max_tile() const {
  return dtype_ == DType::kF32 ? KvRowSource::kPointerTile : KvRowSource::kDequantTile;
}

KvBytes DenseKvStore::held() const {
  const size_t half = rows_held_ * size_t(geo_.n_layers) * geo_.kv_dim() * dtype_size(dtype_);
  return {half, half};
}

size_t DenseKvStore::bytes_fp16() const {
  return rows_held_ * size_t(geo_.n_layers) * geo_.kv_dim() * 2 * 2;
}

std::string DenseKvStore::method() const {
  return dtype_ == DType::kF32 ? "fp32" : dtype_ == DType::kF16 ? "fp16" : "bf16";
}

}  // namespace dllmq
