// safetensors reader: validated header, tensors used in place from a read-only mmap.
// Format: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}},
// then the data section; offsets are relative to the start of the data section.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/dtype.h"
#include "util/mmap_file.h"

namespace dllmq {

struct TensorView {
  std::string name;
  std::string file;  // the safetensors file holding it (for error messages)
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  std::string shape_str() const;
};

class SafetensorsFile {
 public:
  // Maps and validates `path`; throws dllmq::Error naming the file and tensor on any defect.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_->path(); }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  std::unique_ptr<MappedFile> file_;
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint directory: model.safetensors, or shards listed by model.safetensors.index.json.
class Checkpoint {
 public:
  explicit Checkpoint(const std::string& dir);

  // nullptr when absent.
  const TensorView* find(const std::string& name) const;
  const std::map<std::string, const TensorView*>& tensors() const { return index_; }
  const std::string& dir() const { return dir_; }
  size_t total_bytes() const;

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
};

}  // namespace dllmq
