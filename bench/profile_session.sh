#!/usr/bin/env bash
# A GPU call's diagnostics of the persistent loop kernels (run through the device tool):
# knock-out profile (bench/loop_profile.py), end-to-end loop-setting sweep (bench/loop_sweep.py),
# the GPU tier (and a subset with RNNGRAPH_LOOP=fast=1), then Nsight Compute stall reasons of the
# S=1 LSTM forward kernel (when ncu is present). Writes everything under $OUT.
# PROFILE_ARGS, SWEEP_ARGS, FAST_TESTS (a pytest -k expression) override the defaults.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 RNNGRAPH_CACHE=${RNNGRAPH_CACHE:-/tmp/rgcache}
timeout 150 python3 bench/loop_profile.py ${PROFILE_ARGS:---configs lstm:1 gru:1 lstm:64 --variants full fastmath} \
  --out "$OUT/loop_profile.json" 2>&1 | grep -v Warn | tee "$OUT/loop_profile.log"
timeout 150 python3 bench/loop_sweep.py ${SWEEP_ARGS:---configs lstm:1 gru:1 lstm:64 --settings fast=0 fast=1} \
  --out "$OUT/sweep.json" 2>&1 | grep -v Warn | tee "$OUT/sweep.log"
timeout 260 python3 -m pytest -q -m gpu tests/test_gpu.py 2>&1 | tail -15 | tee "$OUT/gpu_tests.log"
RNNGRAPH_LOOP=fast=1 timeout 100 python3 -m pytest -q -m gpu tests/test_gpu.py \
  -k "${FAST_TESTS:-generated_step and (lstm-1l or gru-1l)}" 2>&1 | tail -15 | tee "$OUT/gpu_tests_fast.log"
if command -v ncu >/dev/null; then
  timeout 90 ncu -k regex:prof_fwd --launch-count 1 --section WarpStateStats --section SourceCounters \
    --section SpeedOfLight python3 bench/loop_profile.py --configs lstm:1 --variants lineinfo --iters 1 \
    > "$OUT/ncu-lstm-s1.txt" 2>&1
  tail -5 "$OUT/ncu-lstm-s1.txt"
fi
