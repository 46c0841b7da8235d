// The rules of decoding options that need no model weights: parsing and naming of modes, the
// ranking a sampler resolves to, and check_generate_options (declared in generate.h). Kept apart
// from the decode loop so that whatever validates options before decoding (the CLI, the server's
// request parser, its fuzz harness) does not link the model.
#pragma once

#include "decode/generate.h"

namespace dllmq {

// The ranking a sampler uses: --alg or the architecture's default (throws for a ranking the
// architecture's sampler does not have).
RankAlg resolved_alg(const GenerateOptions& opt, Arch arch);

// Whether decoding runs the block driver (every LLaDA mode, Dream with a cache) rather than
// Dream's whole-canvas sampler.
bool uses_block_driver(const GenerateOptions& opt, Arch arch);

}  // namespace dllmq
