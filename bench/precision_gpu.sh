#!/usr/bin/env bash
# The tensor-core loops' open measurements on the H200, parts chosen by PARTS (default "targets";
# each part takes 3 to 5 minutes, so two fit one 10-minute device command), each part's JSON under $OUT:
#   targets   the precision issue's five target configurations with their anchors (LSTM 1 x 1024 at
#             S = 64 and 128, 1 x 512 at S = 64 and 1: cuDNN fp32 / TF32 / fp16 / bf16 against
#             rnngraph tf32 / bf16 with both loop kinds), `run_all.py --grid precision`'s `targets`
#   pipeline  the same 1 x 1024 tensor-core jobs with RNNGRAPH_LOOP=pipeline=1 (codegen/tuning.py
#             ``pipeline``: the next chunk's vectors loaded before this chunk's products), to set its default
#   kinds     LSTM 1 x 1024 at S = 1, 16, 64: each precision's two loop kinds now that the FFMA loops keep
#             their weight rows in dynamic shared memory too (schedule_options.loop_tensor_cores_by_default)
#
#   on the GPU machine (no network needed; bring .whl with the tree):  PARTS="pipeline kinds" bash bench/precision_gpu.sh
# Prepared here beforehand (git-ignored): .whl/ (bash ../shared/gpu-wheels.sh: numpy 2.4.6 wheels,
# since numba-cuda 0.30 cannot compile kernels with the image's numpy 2.5).
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
MMA='(cudnn-[a-z0-9]+|rnngraph-(tf32|bf16)(-mma)?)$'
for part in ${PARTS:-targets}; do
  echo "=== $part ($(date +%T))"
  case $part in
    targets)
      timeout 300 python3 bench/run_all.py --grid precision --time-budget 280 \
        --only "^lstm-l1-t100-(s(64|128)-h1024-i1024|s(1|64)-h512-i512)/$MMA" \
        --out "$OUT/precision-targets.json" 2>&1 | grep -v Warn | tail -12 ;;
    pipeline)
      RNNGRAPH_LOOP=pipeline=1 timeout 200 python3 bench/run_all.py --grid precision --time-budget 180 \
        --only '^lstm-l1-t100-s(64|128)-h1024-i1024/rnngraph-(tf32|bf16)-mma$' \
        --out "$OUT/precision-h1024-pipelined.json" 2>&1 | grep -v Warn | grep "ms\|records" ;;
    kinds)
      timeout 240 python3 bench/run_all.py --grid precision --time-budget 220 --max-seconds 2 --iters 40 \
        --only '^lstm-l1-t100-s(1|16|64)-h1024-i1024/rnngraph(-(tf32|bf16)(-mma)?)?$' \
        --out "$OUT/precision-h1024-loop-kinds.json" 2>&1 | grep -v Warn | grep "ms\|records" ;;
  esac
done
echo "=== done ($(date +%T))"
