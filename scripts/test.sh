#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite: C++ unit tests and the end-to-end
# checks against the numpy references (Debian's /usr/bin/python3 with python3-numpy), then the
# reliability steps (docs/reliability.md): every fuzz harness briefly from its seed corpus and
# its past findings (scripts/fuzz.sh), and the unit suite under ASan+UBSan (scripts/sanitize.sh).
# DLLMQ_SKIP_RELIABILITY=1 skips those two steps (a quick local run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
(cd build && ctest --output-on-failure -j 1 "$@")
if [ -z "${DLLMQ_SKIP_RELIABILITY:-}" ]; then
  scripts/fuzz.sh build
  scripts/fuzz.sh ci "${DLLMQ_FUZZ_SECONDS:-10}"
  scripts/sanitize.sh
fi
