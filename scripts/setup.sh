#!/usr/bin/env bash
# Idempotent setup of the test command: installs every Debian dependency (when missing) and builds
# every target (dllmq, tests, benchmarks) into build/. The demo's lighter path is
# scripts/build_dllmq.sh. Usage: scripts/setup.sh [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/packages.sh
scripts/ensure_packages.sh "${RUNTIME_PKGS[@]}" "${TEST_PKGS[@]}"

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DDLLMQ_BUILD_TESTS=ON -DDLLMQ_BUILD_BENCH=ON "$@" \
  >/dev/null
cmake --build build -j "$(nproc)"

# --- Evaluation: Python environment of the MATH scorer (lm-eval's sympy exact_match and
# math_verify) -> .venv-eval/, pinned in tools/eval/requirements.txt (PyPI); skipped when up to
# date. Without it `dllmq eval --task math` reports those metrics as not computed and says why.
if ! tools/eval/setup_venv.sh; then
  echo "setup: WARNING: .venv-eval could not be created (PyPI unreachable?); MATH exact_match and" \
       "math_verify will not be computed until tools/eval/setup_venv.sh succeeds" >&2
fi
