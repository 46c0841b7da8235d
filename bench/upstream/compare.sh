#!/usr/bin/env bash
# Alternate dllmq and upstream Fast-dLLM runs, mode by mode, REPEAT times; then summarize.
#
#   bench/upstream/compare.sh FASTDLLM_LLADA_DIR MODEL_DIR OUT_DIR [REPEAT]
#
# Env: PY (python with torch + transformers + einops; default .venv-up/bin/python),
#      DLLMQ (default build/dllmq), THREADS (2), PROMPT_LEN (128), GEN (128), BLOCK (32), STEPS (128),
#      MODES (none,prefix,dual), SEED (0), ID_MAX (30000: prompt ids drawn from [0, ID_MAX)),
#      DTYPE (fp32 | bf16: dllmq --dtype and the KV store, upstream torch_dtype).
# Each run is its own process (model loaded each time; only the generate call is timed).
set -euo pipefail
UP=${1:?fast-dllm llada dir}; MODEL=${2:?model dir}; OUT=${3:?out dir}; REPEAT=${4:-3}
PY=${PY:-.venv-up/bin/python}; DLLMQ=${DLLMQ:-build/dllmq}
THREADS=${THREADS:-2}; PROMPT_LEN=${PROMPT_LEN:-128}; GEN=${GEN:-128}; BLOCK=${BLOCK:-32}; STEPS=${STEPS:-128}
MODES=${MODES:-none,prefix,dual}; SEED=${SEED:-0}; ID_MAX=${ID_MAX:-30000}; DTYPE=${DTYPE:-fp32}
case $DTYPE in fp32) UP_DTYPE=float32 ;; bf16) UP_DTYPE=bfloat16 ;; *) echo "DTYPE: fp32|bf16" >&2; exit 2 ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"

# Same prompt for both: PROMPT_LEN ids drawn uniformly from [0, ID_MAX=30000) with numpy's Generator(SEED).
"$PY" -c "import numpy as np; print(','.join(map(str, np.random.default_rng($SEED).integers(0, $ID_MAX, $PROMPT_LEN))))" \
  > "$OUT/prompt.txt"
P=$(cat "$OUT/prompt.txt")
export OMP_NUM_THREADS=$THREADS

for r in $(seq 1 "$REPEAT"); do
  for m in ${MODES//,/ }; do
    echo "$(date -u +%T) rep $r mode $m dllmq    load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/log.txt"
    /usr/bin/time -f "%U %S %e" -o "$OUT/dllmq_${m}_$r.time" \
      "$DLLMQ" generate -m "$MODEL" --prompt-ids "$P" --gen-length "$GEN" --block-length "$BLOCK" \
      --steps "$STEPS" --cache "$m" --dtype "$DTYPE" --kv "$DTYPE" --threads "$THREADS" --json > "$OUT/dllmq_${m}_$r.json"
    echo "$(date -u +%T) rep $r mode $m upstream load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/log.txt"
    "$PY" "$HERE/run_upstream.py" --fastdllm "$UP" -m "$MODEL" --prompt-ids-file "$OUT/prompt.txt" \
      --gen-length "$GEN" --block-length "$BLOCK" --steps "$STEPS" --modes "$m" --threads "$THREADS" \
      --dtype "$UP_DTYPE" --json > "$OUT/up_${m}_$r.json"
  done
done
echo "$(date -u +%T) done load: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/log.txt"
"$PY" "$HERE/summarize.py" "$OUT" | tee "$OUT/summary.md"
