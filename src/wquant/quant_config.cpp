#include "wquant/quant_config.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "util/error.h"
#include "util/json_limits.h"

namespace dllmq {

namespace {

using nlohmann::json;

bool read_text(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  out = s.str();
  return true;
}

WeightQuantConfig from_object(const json& q, const std::string& where) {
  if (!q.is_object()) fail("{}: must be an object", where);
  WeightQuantConfig qc;
  qc.enabled = true;
  qc.source = where;
  const std::string method = q.value("quant_method", std::string("gptq"));
  if (method != "gptq")
    fail(
        "{}: quant_method '{}' not supported (accepted: 'gptq', the GPTQ layout of AutoGPTQ, "
        "GPTQModel and `dllmq quantize`)",
        where, method);
  if (!q.contains("bits") || !q["bits"].is_number_integer())
    fail("{}: field 'bits' missing or not an integer (accepted: 4 or 8)", where);
  qc.scheme.bits = q["bits"].get<int>();
  if (q.contains("group_size") && !q["group_size"].is_number_integer())
    fail("{}: field 'group_size' must be an integer", where);
  qc.scheme.group_size = q.value("group_size", 128);
  for (const char* k : {"sym", "desc_act"})
    if (q.contains(k) && !q[k].is_boolean()) fail("{}: field '{}' must be true or false", where, k);
  qc.scheme.sym = q.value("sym", true);
  qc.desc_act = q.value("desc_act", false);
  std::string fmt_name = "gptq";
  for (const char* k : {"checkpoint_format", "format"})
    if (q.contains(k)) {
      if (!q[k].is_string()) fail("{}: field '{}' must be a string", where, k);
      fmt_name = q[k].get<std::string>();
      break;
    }
  if (fmt_name != "gptq" && fmt_name != "gptq_v2")
    fail(
        "{}: checkpoint_format '{}' not supported (accepted: 'gptq' (v1, zero points stored "
        "minus one) or 'gptq_v2')",
        where, fmt_name);
  qc.v1 = fmt_name == "gptq";
  check_weight_quant_scheme(qc.scheme, where);
  return qc;
}

}  // namespace

WeightQuantConfig parse_weight_quant_config(const std::string& text, const std::string& path,
                                            bool bare) {
  check_json_depth(text, path);
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail("{}: not valid JSON: {}", path, e.what());
  }
  if (bare) return from_object(j, path);
  if (!j.is_object() || !j.contains("quantization_config") || j["quantization_config"].is_null())
    return {};
  return from_object(j["quantization_config"], path + ": quantization_config");
}

WeightQuantConfig load_weight_quant_config(const std::string& dir) {
  const auto p = std::filesystem::path(dir);
  std::string text;
  if (read_text((p / "config.json").string(), text)) {
    WeightQuantConfig qc = parse_weight_quant_config(text, (p / "config.json").string(), false);
    if (qc.enabled) return qc;
  }
  const std::string qpath = (p / "quantize_config.json").string();
  if (read_text(qpath, text)) return parse_weight_quant_config(text, qpath, true);
  return {};
}

std::string weight_quant_config_json(const WeightQuantConfig& qc) {
  json q = {{"quant_method", "gptq"},
            {"bits", qc.scheme.bits},
            {"group_size", qc.scheme.group_size},
            {"sym", qc.scheme.sym},
            {"desc_act", qc.desc_act},
            {"checkpoint_format", qc.v1 ? "gptq" : "gptq_v2"}};
  return q.dump();
}

std::string weight_format_label(const WeightQuantConfig& qc) {
  if (!qc.enabled) return "";
  std::string s = fmt::format("int{}", qc.scheme.bits);
  if (qc.scheme.group_size > 0) s += fmt::format("-g{}", qc.scheme.group_size);
  s += qc.scheme.sym ? "-sym" : "-asym";
  return s;
}

}  // namespace dllmq
