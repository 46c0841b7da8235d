#!/usr/bin/env bash
# Installs only what the dllmq binary needs (Debian packages, when missing) and builds only the
# `dllmq` target into build/: the first-run path of scripts/demo.sh. scripts/setup.sh (the test
# command's setup) installs the test, benchmark and plotting dependencies and builds the rest.
# Usage: scripts/build_dllmq.sh [extra cmake args...]
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/packages.sh
scripts/ensure_packages.sh "${RUNTIME_PKGS[@]}"

# A fresh build tree is configured without the tests and benchmarks (they need GoogleTest and
# Google Benchmark, which the demo does not install); a tree that scripts/setup.sh configured
# keeps its settings.
cfg=()
[ -f build/CMakeCache.txt ] || cfg=(-DDLLMQ_BUILD_TESTS=OFF -DDLLMQ_BUILD_BENCH=OFF)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${cfg[@]}" "$@" >/dev/null
cmake --build build -j "$(nproc)" --target dllmq
