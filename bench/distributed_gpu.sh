#!/usr/bin/env bash
# Data-parallel throughput on every GPU count the machine has among 1, 2, 4, 8 (a multi-GPU H200
# machine: device kind nvidia-h200-x2/-x4/-x8), the 2 x 512 char LM at S = 64 per GPU:
# bench/distributed.py under torchrun once per count, rows in $OUT/distributed.json.
#
#   on a machine with 2, 4 or 8 GPUs, from the repository root:  bash bench/distributed_gpu.sh
# DIST_ARGS: more arguments for bench/distributed.py (e.g. "--streams 32 --steps 50").
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
gpus=$(nvidia-smi -L | wc -l)
for n in 1 2 4 8; do
  [ "$n" -le "$gpus" ] || break
  echo "=== $n GPU(s) ($(date +%T))"
  timeout 280 torchrun --standalone --nproc-per-node "$n" bench/distributed.py ${DIST_ARGS:-} --out "$OUT/distributed.json" \
    2>&1 | tee "$OUT/distributed-$n.log"
done
echo "=== done ($(date +%T))"
