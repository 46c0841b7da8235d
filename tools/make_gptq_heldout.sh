#!/bin/bash
# Held-out GPTQ checkpoints (docs/weight_quant.md, "Held-out GPTQ checkpoints"): creates a venv
# with AutoGPTQ from PyPI and has it quantize the embedded models (tools/gptq_heldout_quantize.py);
# tests/python/test_gptq_heldout.py then checks dllmq against them. Nothing here is committed.
#
#   tools/make_gptq_heldout.sh [VENV [OUT]]   (defaults: venv-gptq and gptq-heldout beside the
#                                              repository, where the test looks for OUT)
#
# CPU only; needs Debian's python3-torch (1.13) under /usr/bin/python3: the venv sees it through
# --system-site-packages, because PyPI's torch wheels are the CUDA builds (gigabytes) and no CPU
# index is reachable. AutoGPTQ 0.7.1 declares torch>=1.13.0, which Debian's 1.13.0a0 does not
# satisfy as a version string, so it and peft are installed with --no-deps (their other
# dependencies are listed here). numpy is pinned to the system's (torch 1.13 is built on 1.x).
# About 5 minutes on 2 cores once the packages are downloaded.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${1:-$(dirname "$ROOT")/venv-gptq}"
OUT="${2:-$(dirname "$ROOT")/gptq-heldout}"
PY=/usr/bin/python3

"$PY" -c "import torch" 2>/dev/null || { echo "make_gptq_heldout: $PY has no torch (apt install python3-torch)" >&2; exit 1; }
NUMPY="$("$PY" -c 'import numpy; print(numpy.__version__)')"
if [ ! -x "$VENV/bin/python" ]; then
    "$PY" -m venv --system-site-packages "$VENV"
fi
PIP=("$VENV/bin/pip" install --disable-pip-version-check -q)
CONS="$(mktemp)"
trap 'rm -f "$CONS"' EXIT
echo "numpy==$NUMPY" > "$CONS"
"${PIP[@]}" -c "$CONS" "transformers==4.38.2" "tokenizers==0.15.2" "accelerate==0.27.2" \
    "huggingface_hub==0.36.2" "safetensors==0.8.0" "sentencepiece==0.2.3" "datasets==2.18.0" \
    "pyarrow==15.0.2" "pandas==2.3.3" "psutil" "gekko==1.3.3" "rouge==1.0.1"
"${PIP[@]}" --no-deps "peft==0.9.0" "auto-gptq==0.7.1"
"$VENV/bin/python" "$ROOT/tools/gptq_heldout_quantize.py" --out "$OUT"
echo "make_gptq_heldout: checkpoints in $OUT; run tests/python/test_gptq_heldout.py --heldout $OUT"
