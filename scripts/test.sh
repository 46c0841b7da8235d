#!/usr/bin/env bash
# Sets up (scripts/setup.sh) and runs the whole test suite: C++ unit tests and the end-to-end
# checks against the numpy references (Debian's /usr/bin/python3 with python3-numpy).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cd build
ctest --output-on-failure -j 1 "$@"
