#include "io/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "util/error.h"

namespace dllmq {

namespace fs = std::filesystem;
using nlohmann::json;

std::string TensorView::shape_str() const {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

namespace {

DType parse_dtype(const std::string& file, const std::string& name, const std::string& s) {
  if (s == "F32") return DType::kF32;
  if (s == "F16") return DType::kF16;
  if (s == "BF16") return DType::kBF16;
  fail("{}: tensor '{}': unsupported dtype '{}' (expected BF16, F16 or F32)", file, name, s);
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path)
    : file_(std::make_unique<MappedFile>(path)) {
  const size_t size = file_->size();
  if (size < 8)
    fail("{}: truncated: {} bytes, a safetensors file starts with an 8-byte header length", path,
         size);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | file_->data()[i];
  if (header_len > size - 8)
    fail("{}: header length {} runs past the end of the file ({} bytes)", path, header_len, size);
  const char* hdr = reinterpret_cast<const char*>(file_->data() + 8);
  json j;
  try {
    j = json::parse(hdr, hdr + header_len);
  } catch (const json::exception& e) {
    fail("{}: malformed JSON header: {}", path, e.what());
  }
  if (!j.is_object()) fail("{}: malformed JSON header: expected an object", path);

  const uint8_t* data = file_->data() + 8 + header_len;
  const size_t data_size = size - 8 - header_len;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // to detect overlaps
  std::vector<std::string> range_names;
  for (auto& [name, v] : j.items()) {
    if (name == "__metadata__") {
      if (v.is_object())
        for (auto& [k, mv] : v.items())
          if (mv.is_string()) metadata_[k] = mv.get<std::string>();
      continue;
    }
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      fail("{}: tensor '{}': header entry needs dtype, shape and data_offsets", path, name);
    if (!v["dtype"].is_string()) fail("{}: tensor '{}': dtype must be a string", path, name);
    TensorView t;
    t.name = name;
    t.file = path;
    t.dtype = parse_dtype(path, name, v["dtype"].get<std::string>());
    if (!v["shape"].is_array()) fail("{}: tensor '{}': shape must be an array", path, name);
    for (auto& d : v["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        fail("{}: tensor '{}': shape must hold non-negative integers", path, name);
      t.shape.push_back(d.get<int64_t>());
    }
    auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      fail("{}: tensor '{}': data_offsets must be [begin, end]", path, name);
    uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e) fail("{}: tensor '{}': data_offsets [{}, {}] has begin after end", path, name, b, e);
    if (e > data_size)
      fail(
          "{}: tensor '{}': data_offsets [{}, {}] out of range (data section is {} bytes; file "
          "truncated?)",
          path, name, b, e, data_size);
    const uint64_t want = static_cast<uint64_t>(t.numel()) * dtype_size(t.dtype);
    if (want != e - b)
      fail("{}: tensor '{}': shape {} x {} needs {} bytes but data_offsets span {}", path, name,
           t.shape_str(), dtype_name(t.dtype), want, e - b);
    t.data = data + b;
    t.nbytes = e - b;
    ranges.emplace_back(b, e);
    range_names.push_back(name);
    tensors_.emplace(name, std::move(t));
  }
  std::vector<size_t> order(ranges.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a] < ranges[b]; });
  for (size_t i = 1; i < order.size(); ++i) {
    auto& prev = ranges[order[i - 1]];
    auto& cur = ranges[order[i]];
    if (cur.first < prev.second && cur.first != cur.second && prev.first != prev.second)
      fail("{}: tensors '{}' and '{}' have overlapping data_offsets", path,
           range_names[order[i - 1]], range_names[order[i]]);
  }
}

Checkpoint::Checkpoint(const std::string& dir) : dir_(dir) {
  const fs::path d(dir);
  if (!fs::is_directory(d)) fail("{}: not a model directory", dir);
  const fs::path index = d / "model.safetensors.index.json";
  std::vector<std::string> shard_names;
  json weight_map;
  if (fs::exists(index)) {
    std::ifstream in(index);
    json j;
    try {
      j = json::parse(in);
    } catch (const json::exception& e) {
      fail("{}: malformed JSON: {}", index.string(), e.what());
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object())
      fail("{}: missing object field 'weight_map'", index.string());
    weight_map = j["weight_map"];
    for (auto& [name, f] : weight_map.items()) {
      if (!f.is_string()) fail("{}: weight_map['{}'] must be a file name", index.string(), name);
      auto s = f.get<std::string>();
      if (std::find(shard_names.begin(), shard_names.end(), s) == shard_names.end())
        shard_names.push_back(s);
    }
  } else if (fs::exists(d / "model.safetensors")) {
    shard_names.push_back("model.safetensors");
  } else {
    fail("{}: no model.safetensors or model.safetensors.index.json", dir);
  }
  for (auto& s : shard_names) {
    files_.push_back(std::make_unique<SafetensorsFile>((d / s).string()));
    for (auto& [name, t] : files_.back()->tensors()) {
      if (index_.count(name))
        fail("{}: tensor '{}' appears in two shards ({} and {})", dir, name, index_[name]->file,
             t.file);
      index_[name] = &t;
    }
  }
  for (auto& [name, f] : weight_map.items()) {
    auto it = index_.find(name);
    if (it == index_.end())
      fail("{}: weight_map lists tensor '{}' in {} but that shard does not hold it", index.string(),
           name, f.get<std::string>());
    if (fs::path(it->second->file).filename() != f.get<std::string>())
      fail("{}: weight_map puts tensor '{}' in {} but it is in {}", index.string(), name,
           f.get<std::string>(), it->second->file);
  }
}

const TensorView* Checkpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

size_t Checkpoint::total_bytes() const {
  size_t n = 0;
  for (auto& [_, t] : index_) n += t->nbytes;
  return n;
}

}  // namespace dllmq
