// dllmq calib-report FILE: what a calibration artifact holds, per layer, and a PNG heat map
// (dLLM-KVQ: attention-level channel scores with the chosen fp16 channels marked; KVQuant: the
// width of each K channel's calibrated range). The picture is drawn by tools/plot/heatmap.py
// with matplotlib (Debian's python3-matplotlib).
#include <algorithm>
#include <cstdio>
#include <numeric>
#include <sstream>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/plot_helper.h"
#include "io/calib_artifact.h"
#include "util/error.h"

namespace dllmq::cli {

namespace {

struct ReportArgs {
  std::string file, png, python = "/usr/bin/python3";
  bool json = false;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, ',')) out.push_back(x);
  return out;
}

void run(const ReportArgs& a) {
  const CalibArtifact art = load_calib_artifact(a.file);
  const int L = art.n_layers, kvd = art.n_kv_heads * art.head_dim;
  nlohmann::json j = {{"file", a.file},
                      {"method", art.method},
                      {"trajectory", art.trajectory},
                      {"fisher", art.fisher},
                      {"kv_bits_k", art.bits_k},
                      {"kv_bits_v", art.bits_v},
                      {"n_pairs", art.n_pairs},
                      {"n_tokens", art.n_tokens},
                      {"model_fingerprint", art.model_fingerprint},
                      {"metadata", art.extra}};
  nlohmann::json layers = nlohmann::json::array();
  nlohmann::json spec;
  std::vector<std::vector<float>> grid(L);
  std::vector<std::array<int, 2>> marks;
  if (art.method == "dllm-kvq") {
    const auto kl = split(art.extra.count("layer_kl") ? art.extra.at("layer_kl") : "");
    const auto ch = split(
        art.extra.count("layer_changed_decisions") ? art.extra.at("layer_changed_decisions") : "");
    size_t total = 0;
    for (const auto& l : art.layers) total += l.k_fp16_channels.size();
    fmt::print("{} ({} trajectory, K {} / V {} bits, budget {}): {} fp16 K channels of {}\n",
               a.file, art.trajectory, art.bits_k, art.bits_v,
               art.extra.count("budget") ? art.extra.at("budget") : "?", total, size_t(L) * kvd);
    fmt::print(
        "| layer | fp16 channels | share of budget | mean KL (layer alone quantized) | "
        "changed decisions | top channels (head:channel score) |\n|---|---|---|---|---|---|\n");
    for (int l = 0; l < L; ++l) {
      const CalibLayer& c = art.layers[l];
      std::vector<int> idx(kvd);
      std::iota(idx.begin(), idx.end(), 0);
      std::stable_sort(idx.begin(), idx.end(),
                       [&](int x, int y) { return c.k_channel_scores[x] > c.k_channel_scores[y]; });
      std::string top;
      for (int i = 0; i < std::min(4, kvd); ++i)
        top += fmt::format("{}{}:{} {:.3g}", i ? ", " : "", idx[i] / art.head_dim,
                           idx[i] % art.head_dim, c.k_channel_scores[idx[i]]);
      const double share = total ? double(c.k_fp16_channels.size()) / double(total) : 0.0;
      fmt::print("| {} | {} | {:.1f}% | {} | {} | {} |\n", l, c.k_fp16_channels.size(),
                 100.0 * share, l < int(kl.size()) ? kl[l] : "-", l < int(ch.size()) ? ch[l] : "-",
                 top);
      layers.push_back({{"layer", l},
                        {"fp16_channels", c.k_fp16_channels},
                        {"share", share},
                        {"channel_scores", c.k_channel_scores}});
      grid[l] = c.k_channel_scores;
      for (int x : c.k_fp16_channels) marks.push_back({l, x});
    }
    spec = {{"title", fmt::format("dLLM-KVQ channel scores ({} trajectory, {}-bit K)",
                                  art.trajectory, art.bits_k)},
            {"xlabel", fmt::format("K channel (KV head x {} + channel)", art.head_dim)},
            {"ylabel", "layer"},
            {"colorbar", "attention-level score E[(q_c (k_c - q(k_c)))^2]"},
            {"mark_label", "kept at fp16"},
            {"log", true}};
  } else {
    fmt::print("{} (KVQuant, {} trajectory, K {} / V {} bits, fisher {}, outliers {}%)\n", a.file,
               art.trajectory, art.bits_k, art.bits_v, art.fisher, art.outlier_percent);
    fmt::print(
        "| layer | mean K range (upper - lower) | widest channel | K codebook | V codebook "
        "|\n|---|---|---|---|---|\n");
    for (int l = 0; l < L; ++l) {
      const CalibLayer& c = art.layers[l];
      grid[l].resize(kvd);
      double mean = 0.0;
      int widest = 0;
      for (int x = 0; x < kvd; ++x) {
        grid[l][x] = c.k_upper[x] - c.k_lower[x];
        mean += grid[l][x] / kvd;
        if (grid[l][x] > grid[l][widest]) widest = x;
      }
      auto cb = [](const std::vector<float>& v) {
        std::string s;
        for (size_t i = 0; i < v.size() && i < 8; ++i)
          s += fmt::format("{}{:.3f}", i ? " " : "", v[i]);
        return v.size() > 8 ? s + " ..." : s;
      };
      fmt::print("| {} | {:.4g} | {}:{} ({:.4g}) | {} | {} |\n", l, mean, widest / art.head_dim,
                 widest % art.head_dim, grid[l][widest], cb(c.k_codebook), cb(c.v_codebook));
      layers.push_back({{"layer", l},
                        {"k_lower", c.k_lower},
                        {"k_upper", c.k_upper},
                        {"k_codebook", c.k_codebook},
                        {"v_codebook", c.v_codebook}});
    }
    spec = {{"title", fmt::format("KVQuant K channel ranges ({} trajectory, {}-bit)",
                                  art.trajectory, art.bits_k)},
            {"xlabel", fmt::format("K channel (KV head x {} + channel), pre-RoPE", art.head_dim)},
            {"ylabel", "layer"},
            {"colorbar", "calibrated range upper - lower"},
            {"log", false}};
  }
  j["layers"] = layers;
  if (!a.png.empty()) {
    spec["values"] = grid;
    spec["marks"] = marks;
    spec["col_groups"] = art.head_dim;
    draw_with_matplotlib("heatmap.py", spec, a.png, a.python);
    fmt::print(stderr, "calib-report: wrote {}\n", a.png);
  }
  if (a.json) std::puts(j.dump().c_str());
}

}  // namespace

void register_calib_report(CLI::App& app) {
  auto* cmd = app.add_subcommand("calib-report",
                                 "Per-layer table of a calibration artifact, and a PNG heat map");
  auto a = std::make_shared<ReportArgs>();
  cmd->add_option("file", a->file, "artifact from `dllmq calibrate`")->required();
  cmd->add_option("--png", a->png, "write a heat map of channel scores (or K ranges) here");
  cmd->add_option("--python", a->python, "python3 with matplotlib")->capture_default_str();
  cmd->add_flag("--json", a->json, "also print everything as one JSON object");
  cmd->callback([a] { run(*a); });
}

}  // namespace dllmq::cli
