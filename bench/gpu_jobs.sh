#!/usr/bin/env bash
# Run queues of commands side by side, one queue per GPU, in one device call:
#   bash bench/gpu_jobs.sh "0:python3 bench/lm_vs_torch.py --impl rnngraph ..." "1:python3 ..." "1:bash ..."
# Each argument is GPU:COMMAND; a GPU's commands run one after the other with CUDA_VISIBLE_DEVICES
# set to it, the GPUs at the same time. A queue's output goes to $OUT/gpu<N>.log; the script waits
# for every queue and exits non-zero if any command failed (2 for bad arguments). OUT defaults to
# /tmp/out. The caller sets PYTHONPATH (numpy wheel, this checkout) as for any GPU command.
set -uo pipefail
if [ $# -eq 0 ]; then
  echo "usage: bench/gpu_jobs.sh GPU:COMMAND [GPU:COMMAND ...]  (e.g. \"0:python3 bench/run_all.py ...\")" >&2
  exit 2
fi
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
declare -A queue
for job in "$@"; do
  gpu=${job%%:*}
  cmd=${job#*:}
  case $gpu in ''|*[!0-9]*) echo "gpu_jobs.sh: expected GPU:COMMAND, got '$job'" >&2; exit 2;; esac
  queue[$gpu]+="$cmd"$'\n'
done
pids=()
for gpu in "${!queue[@]}"; do
  (
    rc=0
    while IFS= read -r cmd; do
      [ -z "$cmd" ] && continue
      echo "== [GPU $gpu, $(date +%T)] $cmd"
      CUDA_VISIBLE_DEVICES=$gpu bash -c "$cmd" || { echo "== exit $? from: $cmd"; rc=1; }
    done <<< "${queue[$gpu]}"
    echo "== [GPU $gpu, $(date +%T)] queue done"
    exit $rc
  ) > "$OUT/gpu$gpu.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
tail -n 12 "$OUT"/gpu*.log
exit $rc
