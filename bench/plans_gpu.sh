#!/usr/bin/env bash
# The plan choice and the loop kernels at small S (bench/HISTORY.md sections 22 and 23: the
# wavefront against scc-sequential for the char-LM step of several cells and depths; where a
# timestep of the S = 8 loop kernels goes), in one device command, parts chosen by PARTS (default
# "cells layers"); each part's JSON and log under $OUT:
#   cells   bench/experiments/lm_step_plans.py: both plans of the 2 x 512 step of the GRU, peephole
#           and layer-norm LSTM at S = 8 (about 100 s)
#   layers  the same for 4 x 512 LSTM at S = 8 (about 40 s)
#   small   the 2 x 512 LSTM at S = 1 and 4, both plans (about 60 s)
#   knobs   the 2 x 512 LSTM at S = 8, both plans, at the default loop shape and with
#           RNNGRAPH_LOOP=$KNOBS, one process each (default: without the backward loops' flags and
#           early loads, flags=0,prefetch=0; threads=1024; rows=4,cols=8; ksplit=2); KNOB_PLANS
#           (e.g. scc-sequential) times only those plans
#   profile bench/loop_profile.py's knock-outs of the 512-unit LSTM loop kernels at S = 8 (about 60 s):
#           which part of a timestep (grid sync, products, their vector loads, pointwise) costs what
#   ncu     Nsight Compute's warp stall reasons and source counters of that forward loop kernel (lineinfo),
#           where ncu is installed (about 90 s): which link of a warp's chain waits
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
      for knob in "" ${KNOBS:-flags=0,prefetch=0 threads=1024 rows=4,cols=8 ksplit=2}; do
        name=${knob//[=,]/-}  # (a file name with '=' does not come back from the device)
        RNNGRAPH_LOOP=$knob timeout 60 $PLANS ${KNOB_PLANS:+--plans $KNOB_PLANS} --out "$OUT/lm-step-plans-2x512-s8-loop-${name:-default}.json" 2>&1 \
          | tee "$OUT/knobs-${name:-default}.log" | grep "ms read\|rror" | sed "s/^/${knob:-default}: /"
      done ;;
    profile)
      # the grid-synced loops as profiled in bench/HISTORY.md section 23 (the backward is flagged by default since)
      RNNGRAPH_LOOP=${PROFILE_LOOP-flags=0,prefetch=0} timeout 150 python3 bench/loop_profile.py --configs lstm:8 --iters 10 \
        --variants full no-grid-sync no-gemm no-pointwise no-vector-loads sync-only \
        --out "$OUT/loop-profile-lstm-s8.json" 2>&1 | grep -v Warn | tee "$OUT/profile.log" | tail -20 ;;
    ncu)
      command -v ncu >/dev/null || { echo "no ncu"; continue; }
      RNNGRAPH_LOOP=${PROFILE_LOOP-flags=0,prefetch=0} timeout 150 ncu -k regex:prof_fwd --launch-count 1 --section WarpStateStats --section SourceCounters \
        --section SpeedOfLight --section MemoryWorkloadAnalysis python3 bench/loop_profile.py --configs lstm:8 \
        --loops fwd --variants lineinfo --iters 1 > "$OUT/loop-ncu-lstm-s8-fwd.txt" 2>&1
      mkdir -p "$OUT/kernels" && cp "$RNNGRAPH_CACHE"/kernels/rg_*.py "$OUT/kernels/"  # the lines ncu names
      grep -E "Duration|Throughput|Hit Rate|Stall|Warp Cycles|Issued" "$OUT/loop-ncu-lstm-s8-fwd.txt" | head -30 ;;
  esac
  echo "=== $part: exit ${PIPESTATUS[0]} (124: its timeout)"
done
echo "=== done ($(date +%T))"
