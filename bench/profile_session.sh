#!/usr/bin/env bash
# A GPU call's diagnostics of the persistent loop kernels (run through the device tool):
# knock-out profile (bench/loop_profile.py), end-to-end loop-setting sweep (bench/loop_sweep.py),
# the GPU tier (and a subset with RNNGRAPH_LOOP=$KNOB_TESTS_LOOP, default bounds=1,cols=4,unroll=8), then Nsight
# Compute stall reasons of the S=1 LSTM forward kernel (when ncu is present). Writes everything
# under $OUT. PROFILE_ARGS, SWEEP_ARGS, KNOB_TESTS (a pytest -k expression), KNOB_TESTS_LOOP override
# the defaults. PART=1 runs the profile, the sweep and the knob subset (about 9 minutes), PART=2
# the whole tier and ncu (about 6); unset, both (more than one 10-minute device call allows).
# The defaults are session 9's plan: the knock-outs of both S=64 cells and S=1's LSTM with the uint64
# column index, the variant uint64-indices (every subscript unsigned: is it worth generating?),
# and unroll=8 / bounds=1,cols=4,unroll=8 again (within 3 % of the default before that change:
# bench/results/h200-20261201-session8-signed-*; bounds and carveout alone did not help). The
# whole tier took 160 s (TIER_K=generated_step) + 357 s (TIER_K="not generated_step") in session 8:
# two calls, or one warm machine's two calls back to back. TIER_K is a pytest -k expression.
# Run from the repository root with numpy 2.4.6 and the tree on PYTHONPATH (the device tool's
# prefix in bench/gpu_session.sh), e.g. PART=1 bash bench/profile_session.sh.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 RNNGRAPH_CACHE=${RNNGRAPH_CACHE:-/tmp/rgcache}
part() { [ -z "${PART:-}" ] || [ "$PART" = "$1" ]; }
if part 1; then
timeout 200 python3 bench/loop_profile.py ${PROFILE_ARGS:---configs lstm:64 layernorm_lstm:64 lstm:1 --variants full no-grid-sync no-gemm uint64-indices --iters 10} \
  --out "$OUT/loop_profile.json" 2>&1 | grep -v Warn | tee "$OUT/loop_profile.log"
timeout 150 python3 bench/loop_sweep.py ${SWEEP_ARGS:---configs lstm:64 layernorm_lstm:64 --settings unroll=4 unroll=8 bounds=1,cols=4,unroll=8} \
  --out "$OUT/sweep.json" 2>&1 | grep -v Warn | tee "$OUT/sweep.log"
RNNGRAPH_LOOP=${KNOB_TESTS_LOOP:-bounds=1,cols=4,unroll=8} timeout 170 python3 -m pytest -q -m gpu tests/test_gpu.py \
  -k "${KNOB_TESTS:-generated_step and s64}" 2>&1 | tail -15 | tee "$OUT/gpu_tests_knob.log"
fi
if part 2; then
timeout 420 python3 -m pytest -q -m gpu tests/test_gpu.py -k "${TIER_K:-}" 2>&1 | tail -15 | tee "$OUT/gpu_tests.log"
fi
if part 2 && command -v ncu >/dev/null; then
  timeout 90 ncu -k regex:prof_fwd --launch-count 1 --section WarpStateStats --section SourceCounters \
    --section SpeedOfLight python3 bench/loop_profile.py --configs lstm:1 --variants lineinfo --iters 1 \
    > "$OUT/ncu-lstm-s1.txt" 2>&1
  tail -5 "$OUT/ncu-lstm-s1.txt"
fi
