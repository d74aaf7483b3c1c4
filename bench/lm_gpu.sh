#!/usr/bin/env bash
# The language-model comparison in one GPU command: bench/lm_vs_torch.py trains the 2x512 char-level
# LSTM with rnngraph and with torch.nn.LSTM (cuDNN) on the Austen corpus, same batches, same
# budget each, and writes $OUT/lm_vs_torch.json (+ .log).
#
#   on the GPU machine (no network needed; bring .whl, .cache/rg with the tree):  bash bench/lm_gpu.sh
#
# Prepared here beforehand (both paths are git-ignored):
#   .whl/       a numpy 2.4.6 wheel: numba-cuda 0.30.4 cannot compile kernels with numpy 2.5
#   .cache/rg/  the corpus: mkdir -p .cache/rg/austen && cp ~/.cache/rnngraph/austen/*.txt .cache/rg/austen/
#               (or RNNGRAPH_CACHE=$PWD/.cache/rg python3 -c "from rnngraph.data import load_austen; load_austen()")
#
# One GPU: the models train one after the other, LM_MINUTES each (default 4: 2 x 4 min of
# training + compiling + evaluations stay inside the command's 10 minutes; ~17 epochs for rnngraph,
# more for cuDNN, by the estimates in lm_vs_torch.py). Two or more GPUs (nvidia-h200-x2): they train
# side by side, one per GPU, LM_MINUTES each (default 8), and the two results are merged.
# Environment: LM_MINUTES, LM_PARALLEL (auto|0|1), LM_DEADLINE (seconds after this script starts by
# which everything must be over; default 585), LM_ARGS (more lm_vs_torch.py arguments, e.g.
# "--tf32" or "--streams 128"), LM_SKIP_WHEELS=1 (use the installed numpy: a dry run on a CPU machine).
# The 2x1024 word model (perplexity, issue 27), side by side on two GPUs, 4 minutes each:
#   LM_MINUTES=4 LM_ARGS="--level word --hidden 1024 --embed 1024 --window 35 --dropout 0.5 --eval-every 60s" \
#     bash bench/lm_gpu.sh
# (on one GPU its compiles and evaluations may leave too little of 585 s for 2 x 4 minutes under the
# --wall-limit this script sets: run lm_vs_torch.py itself, as its docstring's usage shows).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if [ "${LM_SKIP_WHEELS:-0}" != 1 ] && ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "pip install of .whl/*.whl failed"; exit 1; }
  export PYTHONPATH=/tmp/site:$PWD
else
  echo "warning: no .whl/*.whl here: using the image's numpy (numba-cuda may fail to compile)"
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 RNNGRAPH_CACHE=$PWD/.cache/rg
nvidia-smi -L
python3 -c "import numpy, numba, torch; from numba import cuda; print('numpy', numpy.__version__, 'numba', \
numba.__version__, 'torch', torch.__version__, 'cudnn', torch.backends.cudnn.version(), '| numba sees a GPU:', \
cuda.is_available(), '| torch GPUs:', torch.cuda.device_count())"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
parallel=${LM_PARALLEL:-auto}
if [ "$parallel" = auto ]; then
  if [ "${ngpu:-0}" -ge 2 ]; then parallel=1; else parallel=0; fi
fi
deadline=${LM_DEADLINE:-585}
left=$(( deadline - SECONDS ))
common=(--cache .cache/rg --eval-every 15s --wall-limit $(( left - 30 )) ${LM_ARGS:-})
if [ "$parallel" = 1 ]; then
  minutes=${LM_MINUTES:-8}
  echo "== $ngpu GPUs: rnngraph on GPU 0 and torch on GPU 1 side by side, $minutes min each, ${left}s left"
  CUDA_VISIBLE_DEVICES=0 timeout -k 5 "$left" python3 bench/lm_vs_torch.py --impl rnngraph --minutes "$minutes" \
    "${common[@]}" --out "$OUT/lm_rnngraph.json" >"$OUT/lm_rnngraph.log" 2>&1 &
  p1=$!
  CUDA_VISIBLE_DEVICES=1 timeout -k 5 "$left" python3 bench/lm_vs_torch.py --impl torch --minutes "$minutes" \
    "${common[@]}" --out "$OUT/lm_torch.json" >"$OUT/lm_torch.log" 2>&1 &
  p2=$!
  wait $p1; rc1=$?
  wait $p2; rc2=$?
  tail -n 25 "$OUT/lm_rnngraph.log" "$OUT/lm_torch.log"
  python3 bench/lm_vs_torch.py --merge "$OUT/lm_rnngraph.json" "$OUT/lm_torch.json" --out "$OUT/lm_vs_torch.json"
  echo "exit codes: rnngraph $rc1, torch $rc2"
  exit $(( rc1 || rc2 ))
else
  minutes=${LM_MINUTES:-4}
  echo "== one GPU: rnngraph then torch, $minutes min each, ${left}s left"
  timeout -k 5 "$left" python3 bench/lm_vs_torch.py --impl rnngraph,torch --minutes "$minutes" "${common[@]}" \
    --out "$OUT/lm_vs_torch.json" 2>&1 | tee "$OUT/lm_vs_torch.log"
fi
