#!/usr/bin/env bash
# A GPU call's diagnostics of the persistent loop kernels (run through the device tool): the
# GPU timeline of a training step (bench/kernel_trace.py), knock-out profile
# (bench/loop_profile.py), end-to-end loop-setting sweep (bench/loop_sweep.py),
# the GPU tier (and a subset with RNNGRAPH_LOOP=$KNOB_TESTS_LOOP, default session 8's shape), then Nsight
# Compute stall reasons of the S=1 LSTM forward kernel (when ncu is present). Writes everything
# under $OUT. TRACE_ARGS, PROFILE_ARGS, SWEEP_ARGS, KNOB_TESTS (a pytest -k expression), KNOB_TESTS_LOOP
# override the defaults. PART=1 runs the trace, the profile, the sweep and the knob subset (at
# most 9.5 minutes), PART=2
# the whole tier and ncu (about 7); unset, both (more than one 10-minute device call allows).
# The defaults are session 11's plan: the GPU timeline (bench/kernel_trace.py) of layernorm_lstm S=64
# and of the S=1 LSTM and layer-norm LSTM, whose GPU idled 0.105 and 0.341 ms a step waiting for the
# host in session 10 (bench/results/h200-20261201-session10-trace-*.json: the forward prologue is not
# replayed from a CUDA graph, CuPy refuses cuBLAS calls during capture); the knock-outs and
# per-step times (--steps, now on real gradients) of layernorm_lstm S=64 and the LSTM S=1; the
# layer-norm knobs again at S=64 and S=16 now that the gain and bias gradients left the loop
# (lngrad=1; session 10: 6.99 / 4.82 ms); session 8's shape value-checked as a knob. The whole
# tier took 229 + 138 s in two calls in session 10 (TIER_K, a pytest -k expression, unset).
# Run from the repository root with numpy 2.4.6 and the tree on PYTHONPATH (the device tool's
# prefix in bench/gpu_session.sh), e.g. PART=1 bash bench/profile_session.sh.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 RNNGRAPH_CACHE=${RNNGRAPH_CACHE:-/tmp/rgcache}
part() { [ -z "${PART:-}" ] || [ "$PART" = "$1" ]; }
if part 1; then
timeout 100 python3 bench/kernel_trace.py ${TRACE_ARGS:---configs layernorm_lstm:64 lstm:1 layernorm_lstm:1 --iters 5} \
  --out "$OUT/kernel_trace.json" 2>&1 | grep -v Warn | tee "$OUT/kernel_trace.log"
timeout 160 python3 bench/loop_profile.py ${PROFILE_ARGS:---configs layernorm_lstm:64 lstm:1 --variants full no-grid-sync no-gemm --steps --iters 10} \
  --out "$OUT/loop_profile.json" 2>&1 | grep -v Warn | tee "$OUT/loop_profile.log"
timeout 150 python3 bench/loop_sweep.py ${SWEEP_ARGS:---configs layernorm_lstm:64 layernorm_lstm:16 --settings '' lnsum=1 barrier=2 rows=4} \
  --out "$OUT/sweep.json" 2>&1 | grep -v Warn | tee "$OUT/sweep.log"
RNNGRAPH_LOOP=${KNOB_TESTS_LOOP:-rows=4,cols=8,unroll=4,bounds=0} timeout 150 python3 -m pytest -q -m gpu tests/test_gpu.py \
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
