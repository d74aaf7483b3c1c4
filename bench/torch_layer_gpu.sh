#!/usr/bin/env bash
# The PyTorch layer's GPU checks in one device command (run on the H200), parts chosen by PARTS
# (default "tests overhead bench"):
#   tests     the GPU tier of the layer and the loss heads / non-finite checks
#             (tests/test_gpu_torch_layer.py with TORCH_TESTS=1; tests/test_losses_sim.py,
#             tests/test_nonfinite.py on the GPU)
#   overhead  bench/experiments/torch_layer_overhead.py: where the module's own time goes (B = 1)
#   bench     bench/torch_layer.py: LSTM and its overhead at B = 1, layernorm_lstm at B = 1 per plan
#             and at B = 64
#   plans     bench/torch_layer.py at B = 1 with each plan forced, for the cells in PLAN_CELLS (gru)
#   demo      the GPU demo's training recipe (scripts/demo.sh on a GPU): 2 x 512 LSTM on Austen,
#             then bits/char on the test half
#
#   on the GPU machine (no network needed; bring .whl, .cache/rg with the tree):  bash bench/torch_layer_gpu.sh
# Prepared here beforehand (both git-ignored): .whl/ (numpy 2.4.6 wheels: numba-cuda 0.30 cannot compile kernels with numpy 2.5)
# and the corpus in .cache/rg (RNNGRAPH_CACHE=$PWD/.cache/rg python3 -c "from rnngraph.data import
# load_austen; load_austen()").
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
DATE=$(date +%Y%m%d)
for part in ${PARTS:-tests overhead bench}; do
  echo "=== $part ($(date +%T))"
  case $part in
    tests)
      files="tests/test_losses_sim.py tests/test_nonfinite.py"
      [ "${TORCH_TESTS:-0}" = 1 ] && files="$files tests/test_gpu_torch_layer.py"
      timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -q -m gpu $files 2>&1 | tee "$OUT/gpu-tests.log" ;;
    overhead)
      timeout 200 python3 bench/experiments/torch_layer_overhead.py --out "$OUT/torch-layer-overhead.txt" \
        > "$OUT/torch-layer-overhead.log" 2>&1; tail -5 "$OUT/torch-layer-overhead.log" ;;
    bench)
      timeout 200 python3 bench/torch_layer.py --cells lstm --batches 1 --out "$OUT/torch-layer-lstm-b1.json" 2>&1 \
        | tee "$OUT/torch-layer-lstm-b1.log"
      for plan in scc-sequential wavefront; do
        timeout 240 python3 bench/torch_layer.py --cells layernorm_lstm --batches 1 --overhead-batches --plan $plan \
          --out "$OUT/torch-layer-ln-b1-$plan.json" 2>&1 | tee "$OUT/torch-layer-ln-b1-$plan.log"
      done
      timeout 240 python3 bench/torch_layer.py --cells layernorm_lstm --batches 64 --overhead-batches \
        --out "$OUT/torch-layer-ln-b64.json" 2>&1 | tee "$OUT/torch-layer-ln-b64.log" ;;
    plans)
      for cell in ${PLAN_CELLS:-gru}; do
        for plan in scc-sequential wavefront; do
          timeout 200 python3 bench/torch_layer.py --cells $cell --batches 1 --overhead-batches --plan $plan --no-anchor \
            --out "$OUT/torch-layer-$cell-b1-$plan.json" 2>&1 | grep -v Warn
        done
      done ;;
    demo)
      ckpt=/tmp/demo-gpu
      rm -rf "$ckpt"
      timeout 420 python3 -m rnngraph train --corpus austen --level char --cell lstm --layers 2 --hidden 512 \
        --embed 128 --window 100 --streams 64 --steps "${DEMO_STEPS:-14000}" --optimizer adamw --lr 2e-3 \
        --weight-decay 0.1 --lr-schedule cosine --clip 1.0 --dropout 0.25 --device cuda --seed 0 \
        --eval-every 2000 --time-limit 300 --checkpoint "$ckpt" --no-progress 2>&1 | tee "$OUT/demo-train.log"
      timeout 120 python3 -m rnngraph eval --checkpoint "$ckpt" --split test --device cuda 2>&1 | tee "$OUT/demo-eval.log" ;;
  esac
done
echo "=== done ($(date +%T))"
