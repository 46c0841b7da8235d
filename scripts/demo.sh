#!/usr/bin/env bash
# Sets up dllmq and runs the main job: the embedded default model answers a word problem with
# Fast-dLLM dual-cache parallel decoding, redrawing the canvas as tokens are revealed.
set -euo pipefail
cd "$(dirname "$0")/.."
# Only what the main job needs: the dllmq target and its libraries (scripts/test.sh sets up the rest).
scripts/build_dllmq.sh
PROMPT=${1:-"Mia has 23 marbles. She buys 14 more marbles. Then she gives away 9 marbles. How many marbles does Mia have now?"}
# Generation and block length come from the model's generation_config.json (48 / 16).
exec build/dllmq generate --chat -p "$PROMPT" --cache dual --threshold 0.9 --show-steps
