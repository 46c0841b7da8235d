#include "calib/trajectory_stats.h"

#include <nlohmann/json.hpp>

#include "util/atomic_file.h"

namespace dllmq {

void write_trajectory_stats(const std::string& path, const TraceCalibrator& tc,
                            const std::map<std::string, std::string>& meta) {
  nlohmann::json layers = nlohmann::json::array();
  const auto& st = tc.region_stats();
  for (size_t l = 0; l < st.size(); ++l) {
    nlohmann::json regions = nlohmann::json::object();
    for (int r = 0; r < kNumRegions; ++r) {
      const auto& s = st[l][r];
      nlohmann::json j = {{"rows", s.rows}};
      for (auto [name, v] : {std::pair{"k_min", &s.k_min}, std::pair{"k_max", &s.k_max},
                             std::pair{"v_min", &s.v_min}, std::pair{"v_max", &s.v_max}})
        j[name] = s.rows ? nlohmann::json(*v) : nlohmann::json(nullptr);
      regions[region_name(r)] = std::move(j);
    }
    layers.push_back({{"layer", l}, {"regions", std::move(regions)}});
  }
  nlohmann::json out = {{"metadata", meta}, {"layers", std::move(layers)}};
  write_file_atomic(path, out.dump() + "\n");
}

}  // namespace dllmq
