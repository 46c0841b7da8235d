// safetensors writer for small f32 tensor sets (calibration artifacts), written crash-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace dllmq {

struct F32Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major, numel(shape) values
};

// Tensors in name order (the header lists them sorted, data offsets follow that order),
// string metadata under "__metadata__". Replaces `path` atomically.
void write_safetensors_f32(const std::string& path, const std::map<std::string, F32Tensor>& tensors,
                           const std::map<std::string, std::string>& metadata);

}  // namespace dllmq
