#!/usr/bin/env bash
# One GPU session's checks and benchmarks (run on the H200 through the device tool):
#   GPU tier tests, then the LSTM-vs-cuDNN benchmark. Results go to $OUT.
# Expects numpy 2.4.6 carried in .whl/ (../shared/gpu-wheels.sh) and PYTHONPATH set by the caller.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 RNNGRAPH_CACHE=/tmp/rgcache
nvidia-smi -L
python3 -c "import numpy, numba, numba_cuda, cupy, torch; print('numpy', numpy.__version__, 'numba', numba.__version__, 'cupy', cupy.__version__, 'torch', torch.__version__)"
if [ "${SKIP_TESTS:-0}" != 1 ]; then
  timeout "${TEST_TIMEOUT:-240}" python3 -m pytest -q -m gpu tests/test_gpu.py ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/gpu_tests.log"
fi
timeout "${BENCH_TIMEOUT:-300}" python3 bench/lstm_vs_cudnn.py --out "$OUT/bench.json" ${BENCH_ARGS:-} 2>&1 | tee "$OUT/bench.log"
