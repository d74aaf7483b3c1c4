#!/usr/bin/env bash
# A GPU call's diagnostics of the persistent loop kernels (run on a GPU machine): the
# GPU timeline of a training step (bench/kernel_trace.py), knock-out profile
# (bench/loop_profile.py), end-to-end loop-setting sweep (bench/loop_sweep.py),
# the GPU tier (and a subset with RNNGRAPH_LOOP=$KNOB_TESTS_LOOP, default barrier=3), then Nsight
# Compute stall reasons of the S=1 LSTM forward kernel (when ncu is present). Writes everything
# under $OUT. TRACE_ARGS, PROFILE_ARGS, SYNC_ARGS, SWEEP_ARGS, KNOB_TESTS (a pytest -k expression), KNOB_TESTS_LOOP
# override the defaults. PART=1 runs the trace, the profile, the sync micro-benchmark, the sweep and the knob subset (at
# most 9.5 minutes), PART=2 the tier but its layer-norm cases (at most 9), PART=3 those and ncu
# (at most 9); unset, all (more than one 10-minute device call allows).
# PART=3 last ran on 2026-12-01 (10 passed,
# bench/results/h200-20261201-flags-gpu-tier-ln.log); PART=1 has not run since the flagged
# exchange came: the GPU timeline of
# the S=1 LSTM (now flagged: 3.2 / 3.5 us a timestep in the step) and of layernorm_lstm S=64; the
# knock-outs of the S=1 LSTM and GRU loops (--steps); one grid sync's cost by barrier, grid and
# block size (bench/sync_micro.py: a loop of syncs took 2.0-2.6 us a sync in the S=1
# LSTM kernels before the flagged exchange, against 1.5 in a bare loop of cuda.cg syncs); barrier=3 (red.release
# arrival, codegen/grid_barrier.py) end
# to end at S=64, where one kernel-alone run had it 3 % faster than barrier=1, and
# value-checked as a knob there. PART=2 last ran on the code of
# bench/results/h200-20261201-prefetch-gpu-tier-part2.log (23 passed).
# Run from the repository root with numpy 2.4.6 and the tree on PYTHONPATH (see
# bench/README.md, Running), e.g. PART=1 bash bench/loop_diagnostics.sh.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 RNNGRAPH_CACHE=${RNNGRAPH_CACHE:-/tmp/rgcache}
part() { [ -z "${PART:-}" ] || [ "$PART" = "$1" ]; }
if part 1; then
timeout 100 python3 bench/kernel_trace.py ${TRACE_ARGS:---configs lstm:1 layernorm_lstm:64 --iters 5} \
  --out "$OUT/kernel_trace.json" 2>&1 | grep -v Warn | tee "$OUT/kernel_trace.log"
timeout 160 python3 bench/loop_profile.py ${PROFILE_ARGS:---configs lstm:1 gru:1 --variants full no-grid-sync no-gemm --steps --iters 10} \
  --out "$OUT/loop_profile.json" 2>&1 | grep -v Warn | tee "$OUT/loop_profile.log"
timeout 50 python3 bench/sync_micro.py ${SYNC_ARGS:---blocks 0 33 --threads 256 1024} --out "$OUT/sync_micro.json" 2>&1 | grep -v Warn | tail -60 > "$OUT/sync_micro.log"
timeout 130 python3 bench/loop_sweep.py ${SWEEP_ARGS:---configs lstm:64 layernorm_lstm:64 --settings '' barrier=3} \
  --out "$OUT/sweep.json" 2>&1 | grep -v Warn | tee "$OUT/sweep.log"
RNNGRAPH_LOOP=${KNOB_TESTS_LOOP:-barrier=3} timeout 130 python3 -m pytest -q -m gpu tests/test_gpu.py \
  -k "${KNOB_TESTS:-generated_step and s64}" 2>&1 | tail -15 | tee "$OUT/gpu_tests_knob.log"
fi
# the tier in two halves (a fresh machine compiles for minutes: the whole tier does not
# fit one 10-minute call): PART=2 all but the layer-norm cases, PART=3 those; TIER_K replaces either selection
LN_K="layernorm or persistent_layer_norm"
if part 2; then
timeout 540 python3 -m pytest -q -m gpu tests/test_gpu.py -k "${TIER_K:-not ($LN_K)}" 2>&1 | tail -15 | tee "$OUT/gpu_tests.log"
fi
if part 3; then
timeout 450 python3 -m pytest -q -m gpu tests/test_gpu.py -k "${TIER_K:-$LN_K}" 2>&1 | tail -15 | tee "$OUT/gpu_tests_ln.log"
fi
if part 3 && command -v ncu >/dev/null; then
  timeout 90 ncu -k regex:prof_fwd --launch-count 1 --section WarpStateStats --section SourceCounters \
    --section SpeedOfLight python3 bench/loop_profile.py --configs lstm:1 --variants lineinfo --iters 1 \
    > "$OUT/ncu-lstm-s1.txt" 2>&1
  tail -5 "$OUT/ncu-lstm-s1.txt"
fi
