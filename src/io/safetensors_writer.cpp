#include "io/safetensors_writer.h"

#include <cstring>

#include <nlohmann/json.hpp>

#include "util/atomic_file.h"
#include "util/error.h"

namespace dllmq {

void write_safetensors_f32(const std::string& path, const std::map<std::string, F32Tensor>& tensors,
                           const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h;
  if (!metadata.empty()) h["__metadata__"] = metadata;
  size_t off = 0;
  for (const auto& [name, t] : tensors) {
    size_t n = 1;
    for (int64_t d : t.shape) n *= size_t(d);
    if (n != t.data.size())
      fail("{}: tensor '{}' has {} values for shape of {} elements", path, name, t.data.size(), n);
    h[name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {off, off + n * 4}}};
    off += n * 4;
  }
  std::string header = h.dump();
  while ((header.size() + 8) % 8 != 0) header += ' ';  // align the data section to 8 bytes
  std::string out(8, '\0');
  const uint64_t hl = header.size();
  for (int i = 0; i < 8; ++i) out[i] = char((hl >> (8 * i)) & 0xff);
  out += header;
  out.reserve(out.size() + off);
  for (const auto& [name, t] : tensors)
    out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * 4);  // x86: LE
  write_file_atomic(path, out);
}

void write_safetensors(const std::string& path, const std::vector<OutTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json h;
  if (!metadata.empty()) h["__metadata__"] = metadata;
  size_t off = 0;
  std::vector<size_t> sizes;
  for (const OutTensor& t : tensors) {
    size_t n = 1;
    for (int64_t d : t.shape) n *= size_t(d);
    const size_t nb = n * dtype_size(t.dtype);
    h[t.name] = {{"dtype", std::string(dtype_name(t.dtype))},
                 {"shape", t.shape},
                 {"data_offsets", {off, off + nb}}};
    sizes.push_back(nb);
    off += nb;
  }
  std::string header = h.dump();
  while ((header.size() + 8) % 8 != 0) header += ' ';
  std::string head(8, '\0');
  const uint64_t hl = header.size();
  for (int i = 0; i < 8; ++i) head[i] = char((hl >> (8 * i)) & 0xff);
  AtomicFile f(path);
  f.write(head);
  f.write(header);
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string b = tensors[i].bytes();
    if (b.size() != sizes[i])
      fail("{}: tensor '{}' produced {} bytes for its shape's {}", path, tensors[i].name, b.size(),
           sizes[i]);
    f.write(b);
  }
  f.commit();
}

}  // namespace dllmq
