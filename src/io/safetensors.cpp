#include "io/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/json_limits.h"

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
  if (s == "I32") return DType::kI32;
  fail("{}: tensor '{}': unsupported dtype '{}' (expected BF16, F16, F32 or I32)", file, name, s);
}

}  // namespace

SafetensorsFile::SafetensorsFile(const std::string& path)
    : path_(path), file_(std::make_unique<MappedFile>(path)) {
  parse(file_->data(), file_->size());
}

SafetensorsFile::SafetensorsFile(const std::string& path, std::span<const uint8_t> bytes)
    : path_(path) {
  parse(bytes.data(), bytes.size());
}

void SafetensorsFile::parse(const uint8_t* bytes, size_t size) {
  const std::string& path = path_;
  if (size < 8)
    fail("{}: truncated: {} bytes, a safetensors file starts with an 8-byte header length", path,
         size);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > size - 8)
    fail("{}: header length {} runs past the end of the file ({} bytes)", path, header_len, size);
  const char* hdr = reinterpret_cast<const char*>(bytes + 8);
  json j;
  check_json_depth(std::string_view(hdr, header_len), path);
  try {
    j = json::parse(hdr, hdr + header_len);
  } catch (const json::exception& e) {
    fail("{}: malformed JSON header: {}", path, e.what());
  }
  if (!j.is_object()) fail("{}: malformed JSON header: expected an object", path);

  const uint8_t* data = bytes + 8 + header_len;
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
    // The element count is formed with overflow checks: a shape whose product does not fit in
    // 64 bits cannot describe bytes of this file (and numel() must never overflow later).
    uint64_t numel = 1;
    bool overflow = false;
    for (auto& d : v["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0)
        fail("{}: tensor '{}': shape must hold non-negative integers", path, name);
      const uint64_t dim = d.get<uint64_t>();
      overflow = overflow || (dim != 0 && numel > uint64_t(INT64_MAX) / dim);
      if (!overflow) numel *= dim;
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
    if (overflow)
      fail("{}: tensor '{}': shape {} has more elements than 64 bits can count", path, name,
           t.shape_str());
    const uint64_t esize = dtype_size(t.dtype);
    if (numel > UINT64_MAX / esize)
      fail("{}: tensor '{}': shape {} x {} needs more bytes than 64 bits can count", path, name,
           t.shape_str(), dtype_name(t.dtype));
    const uint64_t want = numel * esize;
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

SafetensorsIndex parse_safetensors_index(const std::string& text, const std::string& path) {
  json j;
  check_json_depth(text, path);
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: malformed JSON: {}", path, e.what());
  }
  if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
    fail("{}: missing object field 'weight_map'", path);
  SafetensorsIndex idx;
  for (auto& [name, f] : j["weight_map"].items()) {
    if (!f.is_string()) fail("{}: weight_map['{}'] must be a file name", path, name);
    auto s = f.get<std::string>();
    // Shards live beside the index: a path (or an empty name) would read some other file.
    if (s.empty() || s == "." || s == ".." || s.find('/') != std::string::npos ||
        s.find('\0') != std::string::npos)
      fail("{}: weight_map['{}'] = '{}': expected a file name in the model directory", path, name,
           s);
    if (std::find(idx.shards.begin(), idx.shards.end(), s) == idx.shards.end())
      idx.shards.push_back(s);
    idx.weight_map.emplace(name, std::move(s));
  }
  if (idx.shards.empty()) fail("{}: weight_map lists no tensors", path);
  return idx;
}

Checkpoint::Checkpoint(const std::string& dir) : dir_(dir) {
  const fs::path d(dir);
  if (!fs::is_directory(d)) fail("{}: not a model directory", dir);
  const fs::path index = d / "model.safetensors.index.json";
  SafetensorsIndex idx;
  if (fs::exists(index)) {
    std::ifstream in(index, std::ios::binary);
    if (!in) fail("{}: cannot open", index.string());
    std::ostringstream text;
    text << in.rdbuf();
    idx = parse_safetensors_index(text.str(), index.string());
  } else if (fs::exists(d / "model.safetensors")) {
    idx.shards.push_back("model.safetensors");
  } else {
    fail("{}: no model.safetensors or model.safetensors.index.json", dir);
  }
  for (auto& s : idx.shards) {
    files_.push_back(std::make_unique<SafetensorsFile>((d / s).string()));
    for (auto& [name, t] : files_.back()->tensors()) {
      if (index_.count(name))
        fail("{}: tensor '{}' appears in two shards ({} and {})", dir, name, index_[name]->file,
             t.file);
      index_[name] = &t;
    }
  }
  for (auto& [name, f] : idx.weight_map) {
    auto it = index_.find(name);
    if (it == index_.end())
      fail("{}: weight_map lists tensor '{}' in {} but that shard does not hold it", index.string(),
           name, f);
    if (fs::path(it->second->file).filename() != f)
      fail("{}: weight_map puts tensor '{}' in {} but it is in {}", index.string(), name, f,
           it->second->file);
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
