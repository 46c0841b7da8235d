// safetensors reader: validated header, tensors used in place from a read-only mmap.
// Format: u64 little-endian header length N, N bytes of JSON {name: {dtype, shape, data_offsets}},
// then the data section; offsets are relative to the start of the data section.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <span>
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
  // Validates `bytes` as the contents of `path` without copying them (they must outlive this
  // object): the same checks on bytes already in memory (fuzzing, tests).
  SafetensorsFile(const std::string& path, std::span<const uint8_t> bytes);

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Throws naming the file when the mapped file was truncated or modified since it was opened.
  void check_unchanged() const {
    if (file_) file_->check_unchanged();
  }

 private:
  void parse(const uint8_t* bytes, size_t size);

  std::string path_;
  std::unique_ptr<MappedFile> file_;  // null when parsing borrowed bytes
  std::map<std::string, TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
};

// model.safetensors.index.json: tensor name -> shard file name (a plain name in the model
// directory), and the shards in first-mention order. Throws naming `path` on any defect.
struct SafetensorsIndex {
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> shards;
};
SafetensorsIndex parse_safetensors_index(const std::string& text, const std::string& path);

// A checkpoint directory: model.safetensors, or shards listed by model.safetensors.index.json.
class Checkpoint {
 public:
  explicit Checkpoint(const std::string& dir);

  // nullptr when absent.
  const TensorView* find(const std::string& name) const;
  const std::map<std::string, const TensorView*>& tensors() const { return index_; }
  const std::string& dir() const { return dir_; }
  size_t total_bytes() const;
  // Throws naming the shard when one was truncated or modified since loading.
  void check_unchanged() const {
    for (const auto& f : files_) f->check_unchanged();
  }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> index_;
};

}  // namespace dllmq
