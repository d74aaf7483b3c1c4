#!/usr/bin/env bash
# The GPU checks and benchmarks of one GPU machine (run on the H200):
#   GPU tier tests, then a subset of the benchmark grid (LSTM, peephole and layer-norm
#   LSTM at H=512, T=100, S in {1, 64}, against cuDNN); BENCH_ARGS replaces that selection
#   (e.g. BENCH_ARGS="--time-budget 400" for the whole grid). Results go to $OUT.
# Expects numpy 2.4.6 copied in .whl/ (a wheel; numba-cuda 0.30.4 cannot compile kernels with numpy 2.5) and PYTHONPATH set by the caller.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 RNNGRAPH_CACHE=/tmp/rgcache
nvidia-smi -L
python3 -c "import numpy, numba, numba_cuda, cupy, torch; print('numpy', numpy.__version__, 'numba', numba.__version__, 'cupy', cupy.__version__, 'torch', torch.__version__)"
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout "${TEST_TIMEOUT:-240}" python3 -m pytest -q -m gpu tests/test_gpu.py ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/gpu_tests.log"
fi
sel='^(lstm|peephole_lstm|layernorm_lstm)-l1-t100-s(1|64)-h512-i512/(rnngraph|cudnn-fp32|cudnn-tf32)$'
timeout "${BENCH_TIMEOUT:-300}" python3 bench/run_all.py --out "$OUT/bench.json" ${BENCH_ARGS:---only "$sel"} 2>&1 \
  | tee "$OUT/bench.log"
