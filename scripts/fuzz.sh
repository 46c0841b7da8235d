#!/usr/bin/env bash
# The libFuzzer harnesses of fuzz/ (docs/reliability.md).
#   scripts/fuzz.sh build                  install clang + libFuzzer if missing, build build-fuzz/
#   scripts/fuzz.sh ci [SECONDS]           every harness: its regression inputs once, then
#                                          SECONDS (default 15) of fuzzing from its seed corpus
#   scripts/fuzz.sh run NAME [SECONDS] [RUNS]
#                                          one long campaign (default 1800 s or 10M executions,
#                                          whichever comes first); corpus grows in
#                                          build-fuzz/corpus/NAME, findings land in
#                                          build-fuzz/findings/NAME, log in build-fuzz/NAME.log
# A finding is a crash, a sanitizer report, a leak, a timeout (> 10 s) or an out-of-memory
# (> 2 GiB) on one input; the exit status is non-zero when any harness had one.
set -euo pipefail
cd "$(dirname "$0")/.."
B=build-fuzz

build() {
  # Debian's clang with its compiler-rt (libFuzzer, ASan, UBSan); the parsers' own -dev packages
  # come with scripts/setup.sh.
  scripts/ensure_packages.sh clang libclang-rt-14-dev libomp-dev  # libomp: the serve_request harness links the --threads flag
  local launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  CXX=clang++ cmake -S fuzz -B "$B" "${launcher[@]}" >/dev/null
  cmake --build "$B" -j "$(nproc)"
}

harnesses() {
  for f in fuzz/fuzz_*.cpp; do basename "$f" .cpp | sed 's/^fuzz_//'; done
}

# Flags every run shares: per-input limits, and no leak check inside the parsers' static caches.
COMMON=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1)

ci() {
  local secs=${1:-15} failed=0 name
  for name in $(harnesses); do
    local exe="$B/fuzz_$name" work="$B/corpus/$name"
    mkdir -p "$work" "$B/findings/$name"
    # Regression inputs (past findings) first: each must now be accepted or refused cleanly.
    if [ -d "fuzz/regressions/$name" ] && [ -n "$(ls -A "fuzz/regressions/$name")" ]; then
      if ! "$exe" "${COMMON[@]}" "fuzz/regressions/$name"/* >"$B/$name.regress.log" 2>&1; then
        echo "fuzz: $name: a regression input fails again (see $B/$name.regress.log)" >&2
        tail -30 "$B/$name.regress.log" >&2
        failed=1
        continue
      fi
    fi
    if "$exe" "${COMMON[@]}" -max_total_time="$secs" -artifact_prefix="$B/findings/$name/" \
        "$work" "fuzz/corpus/$name" >"$B/$name.ci.log" 2>&1; then
      echo "fuzz: $name: $(grep -o 'stat::number_of_executed_units: [0-9]*' "$B/$name.ci.log" | grep -o '[0-9]*$') executions in ${secs} s, no finding"
    else
      echo "fuzz: $name: FINDING (see $B/$name.ci.log and $B/findings/$name)" >&2
      tail -40 "$B/$name.ci.log" >&2
      failed=1
    fi
  done
  return $failed
}

run() {
  local name=$1 secs=${2:-1800} runs=${3:-10000000}
  local exe="$B/fuzz_$name" work="$B/corpus/$name"
  mkdir -p "$work" "$B/findings/$name"
  "$exe" "${COMMON[@]}" -max_total_time="$secs" -runs="$runs" \
    -artifact_prefix="$B/findings/$name/" "$work" "fuzz/corpus/$name" >"$B/$name.log" 2>&1
}

case "${1:-}" in
  build) build ;;
  ci) shift; ci "$@" ;;
  run) shift; run "$@" ;;
  *) sed -n '2,13p' "$0" >&2; exit 2 ;;
esac
