#!/usr/bin/env bash
# A GPU call's diagnostics of the persistent loop kernels (run through the device tool):
# knock-out profile (bench/loop_profile.py), end-to-end loop-setting sweep (bench/loop_sweep.py),
# the GPU tier (and a subset with RNNGRAPH_LOOP=$KNOB_TESTS_LOOP, default session 8's shape), then Nsight
# Compute stall reasons of the S=1 LSTM forward kernel (when ncu is present). Writes everything
# under $OUT. PROFILE_ARGS, SWEEP_ARGS, KNOB_TESTS (a pytest -k expression), KNOB_TESTS_LOOP override
# the defaults. PART=1 runs the profile, the sweep and the knob subset (about 9 minutes), PART=2
# the whole tier and ncu (about 7); unset, both (more than one 10-minute device call allows).
# The defaults are session 10's plan: the knock-outs and per-step times (--steps) of layernorm_lstm S=64,
# the LSTM S=64 and S=1 (session 9, bench/results/h200-20261201-session9-loop-profile.json: the
# layer-norm backward takes 23 us a timestep without its product, the LSTM's 6.7; 2.55 ms of its
# 8.64 are outside the loop kernels, the LSTM's 1.48 of 4.33), a sweep of the layer-norm knobs at
# S=64 and S=16 with session 9's defaults (layernorm_lstm S=16 was 5.32 ms, 5.08 with session 8's
# shape), and session 8's shape value-checked as a knob. The whole tier took 364 s in one call in
# session 9 (TIER_K, a pytest -k expression, unset).
# Run from the repository root with numpy 2.4.6 and the tree on PYTHONPATH (the device tool's
# prefix in bench/gpu_session.sh), e.g. PART=1 bash bench/profile_session.sh.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 RNNGRAPH_CACHE=${RNNGRAPH_CACHE:-/tmp/rgcache}
part() { [ -z "${PART:-}" ] || [ "$PART" = "$1" ]; }
if part 1; then
timeout 240 python3 bench/loop_profile.py ${PROFILE_ARGS:---configs layernorm_lstm:64 lstm:64 lstm:1 --variants full no-grid-sync no-gemm --steps --iters 10} \
  --out "$OUT/loop_profile.json" 2>&1 | grep -v Warn | tee "$OUT/loop_profile.log"
timeout 150 python3 bench/loop_sweep.py ${SWEEP_ARGS:---configs layernorm_lstm:64 layernorm_lstm:16 --settings '' lnsum=1 barrier=2 rows=4} \
  --out "$OUT/sweep.json" 2>&1 | grep -v Warn | tee "$OUT/sweep.log"
RNNGRAPH_LOOP=${KNOB_TESTS_LOOP:-rows=4,cols=8,unroll=4,bounds=0} timeout 170 python3 -m pytest -q -m gpu tests/test_gpu.py \
  -k "${KNOB_TESTS:-generated_step and s64}" 2>&1 | tail -15 | tee "$OUT/gpu_tests_knob.log"
fi
if part 2; then
timeout 450 python3 -m pytest -q -m gpu tests/test_gpu.py -k "${TIER_K:-}" 2>&1 | tail -15 | tee "$OUT/gpu_tests.log"
fi
if part 2 && command -v ncu >/dev/null; then
  timeout 90 ncu -k regex:prof_fwd --launch-count 1 --section WarpStateStats --section SourceCounters \
    --section SpeedOfLight python3 bench/loop_profile.py --configs lstm:1 --variants lineinfo --iters 1 \
    > "$OUT/ncu-lstm-s1.txt" 2>&1
  tail -5 "$OUT/ncu-lstm-s1.txt"
fi
