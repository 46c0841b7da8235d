#!/usr/bin/env bash
# Idempotent setup: installs every Debian dependency (when missing) and builds dllmq into build/.
# Usage: scripts/setup.sh [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."

# libdnnl-dev: oneDNN, the GEMM backend that JIT-compiles for the CPU's instruction set.
# libcpp-httplib-dev: dllmq serve's HTTP server; chromium: the headless test of its page.
PKGS=(cmake g++ make pkg-config libopenblas-openmp-dev libdnnl-dev nlohmann-json3-dev libfmt-dev
      libcli11-dev libpcre2-dev libutf8proc-dev libgtest-dev libgmock-dev libbenchmark-dev python3
      python3-numpy python3-matplotlib libcpp-httplib-dev chromium)
scripts/ensure_packages.sh "${PKGS[@]}"

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build -j "$(nproc)"

# --- Evaluation: Python environment of the MATH scorer (lm-eval's sympy exact_match and
# math_verify) -> .venv-eval/, pinned in tools/eval/requirements.txt (PyPI); skipped when up to
# date. Without it `dllmq eval --task math` reports those metrics as not computed and says why.
if ! tools/eval/setup_venv.sh; then
  echo "setup: WARNING: .venv-eval could not be created (PyPI unreachable?); MATH exact_match and" \
       "math_verify will not be computed until tools/eval/setup_venv.sh succeeds" >&2
fi
