#!/usr/bin/env bash
# Tiled row loops (LoopTuning tiles=1, codegen/loop_tiles.py) and stream groups (groups=4, the default
# from S = 64; codegen/loop_plan.py stream_groups) against the work items in one group on the GPU, parts chosen
# by PARTS (default "kernels tests"; each part fits one device command):
#   kernels  the S = 64 loop kernels alone, as generated (backward loops in four stream groups with a
#            barrier a group, forward loops without layer norms in one), in one
#            group, tiles, four groups with one barrier over the grid, tiles in four groups, timed in
#            one process on the same values (bench/loop_profile.py --variants full groups1 tiles
#            groups4 tiles-groups4 full; max_abs_diff_vs_full is the check), for lstm,
#            layernorm_lstm, gru and peephole_lstm; then the LSTM's
#            hand variants of other tile shapes (bench/experiments/lstm_s64_tiles/gen.py: 4 x 8,
#            4 x 2, 2 x 4 a lane, two steps of 4 columns a trip) and in four stream groups
#            (groups4_*; the backward's max_abs_diff_vs_full checks them, a forward's reads 0 even
#            when wrong: the forward overwrites values already in place)
#   tests    the GPU tier's tiled and grouped cases (tests/test_gpu.py -k "tiled or grouped":
#            float64 reference, H = 512), and the variable-length tier (tests/test_gpu_lengths.py)
#            with RNNGRAPH_LOOP=$KEYS
#   step     bench/startup.py's 2 x 512 S = 64 char LM (cold and warm first call, 300 steps, against
#            PyTorch in the same run) with the defaults and with RNNGRAPH_LOOP=$KEYS
#   layer    bench/torch_layer.py, lstm and layernorm_lstm 2 x 512 at B = 64 against nn.LSTM, with the
#            defaults and with RNNGRAPH_LOOP=$KEYS
#   ncu      Nsight Compute of the LSTM S = 64 backward loop kernel, work items and tiles: is it bound
#            by L2 (every block reads the timestep's 64 x 2,048 gate gradients: 69 MB a timestep)?
# KEYS (default groups=1, the loops in one group): the RNNGRAPH_LOOP keys the tests, step and layer parts set, e.g. "tiles=1,groups=1",
# or "fwdgroups=0" (the forward loops in four groups too; one group is their default from S = 64).
#
#   on the GPU machine (bring .whl with the tree):  PARTS="kernels tests" bash bench/tiles_gpu.sh
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
G=$(nvidia-smi -L | grep -q H200 && echo h200 || echo h100)
KEYS=${KEYS:-groups=1}
D=$(date +%Y%m%d)
for part in ${PARTS:-kernels tests}; do
  echo "=== $part ($(date +%T))"
  case $part in
    kernels)
      for cfg in lstm:64 layernorm_lstm:64 gru:64 peephole_lstm:64; do
        timeout 200 python3 bench/loop_profile.py --configs "$cfg" --variants full groups1 tiles groups4 tiles-groups4 full --iters 40 \
          --out "$OUT/$G-$D-loop-tiles-${cfg%%:*}-s64.json" 2>&1 | grep -v Warn | tee "$OUT/$G-$D-loop-tiles-${cfg%%:*}-s64.log"
      done
      python3 bench/experiments/lstm_s64_tiles/gen.py /tmp/tiles
      timeout 240 python3 bench/loop_profile.py --configs lstm:64 --variants full tiles --iters 40 \
        --files /tmp/tiles/fwd_tile_*.py /tmp/tiles/bwd_tile_*.py /tmp/tiles/groups4_*.py /tmp/tiles/full_fwd.py \
        /tmp/tiles/full_bwd.py \
        --out "$OUT/$G-$D-loop-tiles-lstm-s64-shapes.json" 2>&1 | grep -v Warn | tee "$OUT/$G-$D-loop-tiles-lstm-s64-shapes.log" ;;
    tests)
      timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -q -m gpu tests/test_gpu.py -k "tiled or grouped" 2>&1 \
        | tee "$OUT/$G-$D-gpu-tier-tiles.log"
      RNNGRAPH_LOOP="$KEYS" timeout 200 python3 -m pytest -q -m gpu tests/test_gpu_lengths.py 2>&1 \
        | tee "$OUT/$G-$D-gpu-tier-tiles-lengths.log" ;;
    step)
      timeout 280 python3 bench/startup.py --models 2x512-s64 --out "$OUT/$G-$D-startup-and-step-s64-defaults.json" 2>&1 \
        | tee "$OUT/$G-$D-startup-defaults.log"
      RNNGRAPH_LOOP="$KEYS" timeout 280 python3 bench/startup.py --models 2x512-s64 \
        --out "$OUT/$G-$D-startup-and-step-s64-${KEYS//[=,]/-}.json" 2>&1 | tee "$OUT/$G-$D-startup-keys.log" ;;
    layer)
      timeout 280 python3 bench/torch_layer.py --cells lstm layernorm_lstm --batches 64 --overhead-batches \
        --out "$OUT/$G-$D-torch-layer-b64-defaults.json" 2>&1 | tee "$OUT/$G-$D-torch-layer-defaults.log"
      RNNGRAPH_LOOP="$KEYS" timeout 280 python3 bench/torch_layer.py --cells lstm layernorm_lstm --batches 64 \
        --overhead-batches --out "$OUT/$G-$D-torch-layer-b64-${KEYS//[=,]/-}.json" 2>&1 | tee "$OUT/$G-$D-torch-layer-keys.log" ;;
    ncu)
      for v in full tiles; do
        timeout 150 ncu --kernel-name regex:prof_bwd --launch-count 1 --section SpeedOfLight \
          --section MemoryWorkloadAnalysis --section SchedulerStats python3 bench/loop_profile.py --configs lstm:64 \
          --loops bwd --variants "$v" --iters 1 > "$OUT/$G-$D-loop-ncu-lstm-s64-h512-bwd-$v.txt" 2>&1
        grep -E "Duration|Throughput|Hit Rate|Issued Ipc|Busy" "$OUT/$G-$D-loop-ncu-lstm-s64-h512-bwd-$v.txt"
      done ;;
  esac
done
echo "=== done ($(date +%T))"
