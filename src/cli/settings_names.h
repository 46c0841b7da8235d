// The request settings (src/settings: decoding flags, their ranges and defaults, the prompt
// codec) under the names the subcommands use. Settings are a layer below both front ends, cli/
// and serve/, so neither imports the other; only cli/cmd_serve.cpp includes serve/.
#pragma once

#include "settings/flag_ranges.h"
#include "settings/generate_flags.h"
#include "settings/text_codec.h"

namespace dllmq::cli {
using namespace dllmq::settings;  // NOLINT(google-build-using-namespace): one layer's names
}  // namespace dllmq::cli
