#!/usr/bin/env bash
# The C++ unit suite (GoogleTest, every test of tests/unit) built with AddressSanitizer and
# UndefinedBehaviorSanitizer (DLLMQ_SANITIZE) into build-asan/, and run; any sanitizer report
# fails it (halt_on_error). Needs the packages of scripts/setup.sh.
#   scripts/sanitize.sh [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# -O1 -g1: sanitizer reports with line numbers, at a fraction of -O2 -g's compile time on CI's
# two cores; asserts stay on (no NDEBUG).
cmake -S . -B build-asan -DDLLMQ_SANITIZE=ON -DDLLMQ_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=Sanitize \
  -DCMAKE_CXX_FLAGS_SANITIZE="-O1 -g1" "${launcher[@]}" >/dev/null
cmake --build build-asan -j "$(nproc)" --target dllmq_tests
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_stack_use_after_return=0
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
cd build-asan
# The unit tests only (the py_* end-to-end checks run against the Release binary).
ctest --output-on-failure -j 1 -E '^py_' --timeout 600 "$@"
