// Source of the Python driver that runs inside the sandbox (written into each sample's directory).
#pragma once

namespace dllmq::eval {

// Reads payload.json from the cwd, optionally sanitizes the code (Fast-dLLM's post-processing:
// longest parsable span of the first 100 lines, keep imports + classes + returning functions +
// simple assignments reachable from the entry point), execs code + "\n" + test in a fresh globals
// dict with stdin/stdout on /dev/null (as HF code_eval), and writes one JSON result to fd 3.
extern const char* const kSandboxRunnerPy;

}  // namespace dllmq::eval
