#!/usr/bin/env bash
# The open questions of the plan choice at small S (bench/HISTORY.md section 22: the wavefront
# was 3 to 5 % faster than scc-sequential for the 2 x 512 LSTM char-LM step at S = 2, 8 and 16 on
# an H100, losses unread, while the cost model, rnngraph/passes/cost.py, keeps scc-sequential), in
# one device command, parts chosen by PARTS (default "cells layers"); each part's JSON and log
# under $OUT:
#   cells   bench/experiments/lm_step_plans.py: both plans of the 2 x 512 step of the GRU, peephole
#           and layer-norm LSTM at S = 8 (about 100 s)
#   layers  the same for 4 x 512 LSTM at S = 8 (about 40 s)
#   small   the 2 x 512 LSTM at S = 1 and 4, both plans (about 60 s)
#   knobs   the 2 x 512 LSTM at S = 8, both plans, at the default loop shape and with
#           RNNGRAPH_LOOP=$KNOBS (default "threads=1024 rows=4,cols=8 ksplit=2"), one process each:
#           the loops at small S are bound by each warp's chain of loads, products and reductions
#
#   on the GPU machine (no network needed; bring .whl with the tree, and .cache/rg to reuse compiled
#   kernels):  PARTS="cells layers" bash bench/plans_gpu.sh
# Prepared here beforehand (git-ignored): .whl/ (bash ../shared/gpu-wheels.sh: numpy 2.4.6 wheels,
# since numba-cuda 0.30 cannot compile kernels with the image's numpy 2.5).
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
PLANS="python3 bench/experiments/lm_step_plans.py --models 2x512-s8 --steps 100"
for part in ${PARTS:-cells layers}; do
  echo "=== $part ($(date +%T))"
  case $part in
    cells)
      timeout 150 $PLANS --cells gru peephole_lstm layernorm_lstm --out "$OUT/lm-step-plans-2x512-s8-cells.json" 2>&1 \
        | tee "$OUT/cells.log" | grep "ms read\|rror" ;;
    layers)
      timeout 80 $PLANS --layers 4 --out "$OUT/lm-step-plans-4x512-s8.json" 2>&1 | tee "$OUT/layers.log" \
        | grep "ms read\|rror" ;;
    small)
      timeout 120 $PLANS --streams 1 4 --out "$OUT/lm-step-plans-2x512-s1-s4.json" 2>&1 | tee "$OUT/small.log" \
        | grep "ms read\|rror" ;;
    knobs)
      for knob in "" ${KNOBS:-threads=1024 rows=4,cols=8 ksplit=2}; do
        name=${knob//[=,]/-}  # (a file name with '=' does not come back from the device)
        RNNGRAPH_LOOP=$knob timeout 60 $PLANS --out "$OUT/lm-step-plans-2x512-s8-loop-${name:-default}.json" 2>&1 \
          | tee "$OUT/knobs-${name:-default}.log" | grep "ms read\|rror" | sed "s/^/${knob:-default}: /"
      done ;;
  esac
  echo "=== $part: exit ${PIPESTATUS[0]} (124: its timeout)"
done
echo "=== done ($(date +%T))"
