// safetensors writer for small f32 tensor sets (calibration artifacts), written crash-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/dtype.h"

namespace dllmq {

struct F32Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;  // row-major, numel(shape) values
};

// Tensors in name order (the header lists them sorted, data offsets follow that order),
// string metadata under "__metadata__". Replaces `path` atomically.
void write_safetensors_f32(const std::string& path, const std::map<std::string, F32Tensor>& tensors,
                           const std::map<std::string, std::string>& metadata);

// A tensor of any dtype whose bytes are produced only when the writer reaches it (a checkpoint
// is written one tensor in memory at a time).
struct OutTensor {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::function<std::string()> bytes;  // exactly numel(shape) * dtype_size(dtype) bytes
};

// Tensors in the order given (header and data alike), streamed to a temporary file that replaces
// `path` atomically once complete. Throws naming the file and tensor on a size mismatch.
void write_safetensors(const std::string& path, const std::vector<OutTensor>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace dllmq
