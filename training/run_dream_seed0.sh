#!/bin/sh
# Reproduces models/dllmq-synth-dream-tiny (seed 0): Dream-v0 architecture (GQA 8 query / 2 KV heads,
# q/k/v biases, untied head), initialised from the shipped LLaDA weights (models/dllmq-synth-tiny at 1e4968d,
# init_from_llada.py; as Dream-v0 was initialised from Qwen2.5) and trained with Dream's objective
# (logit shift: position i predicted from raw position i-1; masked-diffusion loss with the 1/t weight)
# on the synthetic stories in the Qwen2.5 chat template. Batch 64, uniform random batches,
# AdamW 5e-4 (50 warmup steps, cosine to 5e-5), wd 0.1, clip 1.0, bf16 autocast, 1 thread;
# stopped at step 1,900 of the final 2,200-step schedule for time.
# Resumable: rerunning resumes from training/checkpoints/dream/seed0.pt.
# Python: Debian's /usr/bin/python3 (python3-torch 1.13) with `tokenizers` from PyPI.
set -e
cd "$(dirname "$0")/.."
export OMP_WAIT_POLICY=PASSIVE
[ -f data/synth/train.jsonl ] || /usr/bin/python3 training/synth_task.py --out data/synth
# The LLaDA weights the run started from: models/dllmq-synth-tiny as of commit 1e4968d (83.3% dual tau 0.9),
# taken from git so that a retrained LLaDA model does not change this recipe.
INIT=training/checkpoints/llada-1e4968d
mkdir -p $INIT
for f in config.json model.safetensors; do git show 1e4968d:models/dllmq-synth-tiny/$f > $INIT/$f; done
/usr/bin/python3 training/make_tokenizer.py --arch dream --out models/dllmq-synth-dream-tiny
D="/usr/bin/python3 training/train.py --arch dream --init-from-llada $INIT --seed 0 --bf16 --threads 1 --batch 64 --no-bucket \
   --lr 5e-4 --min-lr 5e-5 --warmup 50 --n-val-eval 100 --ckpt-every 100 --ckpt-dir training/checkpoints/dream --log-dir training/logs/dream"
# The shipped run's three segments (the schedule was changed twice by resuming; see the model card):
$D --steps 1500 --eval-every 250 --stop-at 400
$D --steps 3600 --eval-every 500 --stop-at 600
$D --steps 2200 --eval-every 500 --stop-at 1900
/usr/bin/python3 training/export.py --ckpt training/checkpoints/dream/seed0.pt --out models/dllmq-synth-dream-tiny
