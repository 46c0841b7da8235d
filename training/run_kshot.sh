#!/bin/sh
# The long-prompt LLaDA variant (issue 30): the shipped dllmq-synth-tiny fine-tuned on k-shot prompts
# of 400-800 tokens (training/make_kshot.py), exported with max_sequence_length 1024. Resumable:
# rerun the same command and train.py continues from training/checkpoints/kshot/seed0.pt.
# Cost measured on 2 shared Zen 3 vCPUs: ~20 s per step at batch 16 in fp32 (bf16 autocast was
# slower: no bf16 arithmetic on that CPU), so batch 8 and a short schedule.
set -e
cd "$(dirname "$0")/.."
export OMP_WAIT_POLICY=PASSIVE
test -f data/synth/train.jsonl || python3 training/synth_task.py --out data/synth
test -f data/synth/train_kshot.jsonl || /usr/bin/python3 training/make_kshot.py
D="--ckpt-dir training/checkpoints/kshot --log-dir training/logs/kshot"
/usr/bin/python3 training/train.py --seed 0 --threads 2 --batch 8 --steps 800 --lr 3e-4 --min-lr 3e-5 \
  --warmup 50 --max-seq-len 1024 --init-from models/dllmq-synth-tiny --train-files train_kshot.jsonl \
  --val-files validation_kshot.jsonl --n-val-eval 20 --eval-every 100000 --ckpt-every 25 $D "$@"
/usr/bin/python3 training/export.py --ckpt training/checkpoints/kshot/seed0.pt --out models/dllmq-synth-kshot
