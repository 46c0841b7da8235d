#!/usr/bin/env bash
# Creates .venv-eval/, the Python environment of the MATH scorer (tools/eval/math_equiv.py: sympy,
# antlr4-python3-runtime 4.11, math-verify), from the exact pins and hashes in
# tools/eval/requirements.txt (PyPI). `dllmq eval` finds it without flags.
# Idempotent: does nothing when the venv was made from the same requirements file and the scorer
# loads in it. Called by scripts/setup.sh; can be run alone.
# Env: DLLMQ_EVAL_VENV (default <repo>/.venv-eval), DLLMQ_BASE_PYTHON (default /usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/../.."

VENV=${DLLMQ_EVAL_VENV:-$PWD/.venv-eval}
REQ=tools/eval/requirements.txt
BASE=${DLLMQ_BASE_PYTHON:-/usr/bin/python3}
[ -x "$BASE" ] || BASE=$(command -v python3)
STAMP="$VENV/.dllmq-requirements.sha256"
want=$(sha256sum "$REQ" | cut -d' ' -f1)

if [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ] &&
   "$VENV/bin/python" -I tools/eval/math_equiv.py --check >/dev/null 2>&1; then
  echo "setup: $VENV is up to date (MATH scorer)" >&2
  exit 0
fi

# Debian ships the venv module (and ensurepip) separately.
if ! "$BASE" -c 'import venv, ensurepip' 2>/dev/null; then
  echo "setup: installing python3-venv" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
fi

echo "setup: creating $VENV (MATH scorer: $(grep -oE '^[A-Za-z0-9_.-]+==[^ ]+' "$REQ" | tr '\n' ' '))" >&2
t0=$(date +%s)
rm -rf "$VENV"
"$BASE" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check --no-input --no-deps \
  --require-hashes -r "$REQ"
"$VENV/bin/python" -I tools/eval/math_equiv.py --check >/dev/null
echo "$want" > "$STAMP"
echo "setup: $VENV ready in $(( $(date +%s) - t0 )) s" >&2
