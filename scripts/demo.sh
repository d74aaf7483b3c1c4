#!/usr/bin/env bash
# README Quickstart, command 1: sets up .venv (scripts/setup.sh), then trains a character-level
# LSTM language model on Jane Austen's novels, printing the schedule, the validation bits/char as
# it falls, the bits/char on held-out text, and a sample.
#
# On a machine with an NVIDIA GPU (nvidia-smi lists one; the GPU extras are installed then):
#   the main job: 2 x 512 LSTM, embedding 128; window 100 x 64 streams; AdamW lr 2e-3, weight
#   decay 0.1, cosine schedule to 2e-4 at step 14,000, clip 1.0, dropout 0.25; bits/char on the
#   test half of Persuasion at the end. Measured on one H200
#   (bench/results/h200-20261202-demo-gpu-austen-2x512.log): 183 s of training at ~600k chars/s,
#   validation 1.80, 1.69, 1.69, 1.65, 1.63, 1.63, 1.63 every 2,000 steps, test 1.588 bits/char;
#   about 30 s more to compile the kernels. --time-limit 300 stops training early on a slower GPU.
# Without one (or where numba finds none): the small CPU run below.
#   1 layer LSTM, hidden 128, embedding 32; window 32 x 32 streams; Adam lr 0.01, clip 1.0;
#   1500 steps (1.5M characters, about 40% of one pass over the five training novels).
#   Validation during training uses the first 50,000 characters of the validation text (the first
#   half of Persuasion) to stay fast; `rnngraph eval` at the end scores all of it.
#   Measured on 2 CPU cores (shared with other work at times): 40-107 s of training, 89-162 s in
#   all with a fresh setup (no pip cache, corpus downloaded). Validation every 250 steps: 2.71,
#   2.51, 2.43, 2.41, 2.35, 2.33 bits/char; 2.26 on the whole validation text. --time-limit 170
#   stops training early (still validating, checkpointing and sampling) should a slow or busy
#   machine put the 5-minute budget at risk; validation is below 2.5 from about step 550.
# Environment: RNNGRAPH_DEMO_STEPS (default 14000 on a GPU, 1500 on the CPU), RNNGRAPH_DEMO_DEVICE
# (cpu: the CPU run on a GPU machine too), RNNGRAPH_CACHE (corpus cache, default ~/.cache/rnngraph).
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
device=cpu
if [ "${RNNGRAPH_DEMO_DEVICE:-auto}" != cpu ] && command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  device=cuda
  export RNNGRAPH_EXTRAS=${RNNGRAPH_EXTRAS:-test,plot,data,cuda}
fi
echo "setting up .venv (scripts/setup.sh${RNNGRAPH_EXTRAS:+, extras $RNNGRAPH_EXTRAS}) ..."
if ! log=$(scripts/setup.sh 2>&1); then echo "$log"; exit 1; fi
py=.venv/bin/python
if [ "$device" = cuda ] && ! "$py" -c "from numba import cuda; assert cuda.is_available()" 2>/dev/null; then
  echo "nvidia-smi lists a GPU but numba cannot use it (a CUDA 13 driver is needed): the CPU run instead"
  device=cpu
fi

# The corpus comes from the Debian package r-cran-janeaustenr (apt-get download, once; cached).
# A machine without package lists needs `apt-get update` first: do it when we may.
if ! "$py" -c "from rnngraph.data import load_austen; load_austen()" 2>/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "fetching the Austen corpus needs fresh package lists: apt-get update"
    apt-get update -qq >/dev/null 2>&1 || true
  fi
fi

ckpt=.cache/demo-checkpoint
rm -rf "$ckpt"
if [ "$device" = cuda ]; then
  "$py" -m rnngraph train --corpus austen --level char --cell lstm --layers 2 --hidden 512 --embed 128 \
    --window 100 --streams 64 --steps "${RNNGRAPH_DEMO_STEPS:-14000}" --optimizer adamw --lr 2e-3 --weight-decay 0.1 \
    --lr-schedule cosine --clip 1.0 --dropout 0.25 --device cuda --seed 0 --eval-every 2000 --time-limit 300 \
    --checkpoint "$ckpt" --show-schedule
  split=test
else
  "$py" -m rnngraph train --corpus austen --level char --cell lstm --layers 1 --hidden 128 --embed 32 \
    --window 32 --streams 32 --steps "${RNNGRAPH_DEMO_STEPS:-1500}" --optimizer adam --lr 0.01 --clip 1.0 \
    --device cpu --seed 0 --eval-every 250 --eval-tokens 50000 --time-limit 170 --checkpoint "$ckpt" \
    --show-schedule
  split=valid
fi
"$py" -m rnngraph eval --checkpoint "$ckpt" --split "$split" --device "$device"
echo "sample (temperature 0.6):"
"$py" -m rnngraph sample --checkpoint "$ckpt" --prime "It is a truth universally acknowledged" \
  --length 400 --temperature 0.6 --seed 1
echo "demo finished in $((SECONDS - start)) s (checkpoint in $ckpt)"
