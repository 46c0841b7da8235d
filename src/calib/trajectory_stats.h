// `dllmq calibrate --stats FILE`: the trajectory statistics a calibration saw, per layer and
// region (prompt / decoded prefix / active block / masked suffix): rows read and the per-channel
// min and max of the pre-RoPE K and of V (JSON; null where a region had no rows). Comparing two
// such files shows how far the states of two trajectories (e.g. TRACE and ar) are apart.
#pragma once

#include <map>
#include <string>

#include "calib/trace_calibrator.h"

namespace dllmq {

void write_trajectory_stats(const std::string& path, const TraceCalibrator& tc,
                            const std::map<std::string, std::string>& meta);

}  // namespace dllmq
