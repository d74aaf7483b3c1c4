#!/usr/bin/env bash
# The LSH output layer's GPU checks and benchmark in one device command (run on the H200), parts
# chosen by PARTS (default "tests bench"):
#   tests  the LSH kernels' tests on the GPU (tests/test_lsh_kernels_sim.py, test_lsh_sparse_sim.py,
#          test_lsh_layer_sim.py, test_lsh_head_cuda_sim.py run in the GPU tier where a GPU is present)
#   bench  bench/lsh_gpu.py: LSH vs dense fp32 / bf16 output layers vs PyTorch on the
#          Amazon-670K-shaped synthetic set (LSH_ARGS: more arguments, e.g. --train 100000 for a subset,
#          --label-skew 1.1 for long-tailed labels, where P@1 means something)
#
#   on the GPU machine (no network needed; bring .whl with the tree):  bash bench/lsh_gpu.sh
# Prepared here beforehand (git-ignored): .whl/ (numpy 2.4.6 wheels: numba-cuda 0.30 cannot compile kernels with numpy 2.5).
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
for part in ${PARTS:-tests bench}; do
  echo "=== $part ($(date +%T))"
  case $part in
    tests)
      timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_lsh_kernels_sim.py \
        tests/test_lsh_sparse_sim.py tests/test_lsh_layer_sim.py tests/test_lsh_head_cuda_sim.py 2>&1 | tee "$OUT/lsh-gpu-tests.log" ;;
    bench)
      timeout 540 python3 bench/lsh_gpu.py ${LSH_ARGS:-} --out "$OUT/lsh-gpu.json" 2>&1 | tee "$OUT/lsh-gpu.log" ;;
  esac
done
echo "=== done ($(date +%T))"
