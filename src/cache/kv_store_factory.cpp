#include "cache/kv_store_factory.h"

#include "cache/dense_kv_store.h"
#include "util/error.h"

namespace dllmq {

std::unique_ptr<KvStore> make_kv_store(const std::string& spec, KvGeometry geo,
                                       const RopeTable& rope) {
  if (spec == "fp32" || spec == "f32")
    return std::make_unique<DenseKvStore>(geo, DType::kF32, rope);
  if (spec == "fp16" || spec == "f16")
    return std::make_unique<DenseKvStore>(geo, DType::kF16, rope);
  if (spec == "bf16") return std::make_unique<DenseKvStore>(geo, DType::kBF16, rope);
  fail(
      "--kv: unknown KV store '{}' (expected fp32, fp16 or bf16; quantized stores are not built "
      "yet)",
      spec);
}

}  // namespace dllmq
