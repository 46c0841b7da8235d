// Builds the KV store named by --kv.
#pragma once

#include <memory>
#include <string>

#include "cache/kv_store.h"
#include "ops/rope.h"

namespace dllmq {

// spec: fp32 | fp16 | bf16. Throws naming --kv for anything else.
std::unique_ptr<KvStore> make_kv_store(const std::string& spec, KvGeometry geo,
                                       const RopeTable& rope);

}  // namespace dllmq
