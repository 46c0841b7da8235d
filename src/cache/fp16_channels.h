// dLLM-KVQ's fp16 K channel lists ([layer][kv_head] -> channel indices), checked once for both
// stores that keep them (the KIVI base and the KVQuant base).
#pragma once

#include <vector>

#include "cache/kv_store.h"

namespace dllmq {

using Fp16Channels = std::vector<std::vector<std::vector<int>>>;

// Sorts and de-duplicates every list; a list count that does not match the model or a channel
// outside [0, head_dim) is an error (a corrupt artifact must not index out of bounds).
void normalize_fp16_channels(Fp16Channels& ch, KvGeometry geo);

// Number of kept channels over all layers and heads.
size_t count_fp16_channels(const Fp16Channels& ch);

}  // namespace dllmq
