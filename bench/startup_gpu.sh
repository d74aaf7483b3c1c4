#!/usr/bin/env bash
# Startup and per-step overhead on the GPU in one device command (run on the H200), parts chosen by
# PARTS (default "tests trace startup"):
#   tests    the GPU tier of the kernel cache, the training step replayed as one CUDA graph, its
#            non-finite check, variable lengths and the chunked softmax head (GPU_TESTS: the files)
#   trace    bench/kernel_trace.py --modes lm-step lm-step-unread: the GPU timeline of one char-LM
#            training step (1 x 512, S = 1 and 64), busy time against the step's wall time, the loss
#            read every step and left unread (100 steps: the run's fill and drain matter little)
#   host     bench/step_host_profile.py: the host's time in a 1 x 512 S = 1 training call, profiled
#   startup  bench/startup.py: first-call time of fresh processes (cold and warm kernel cache) and
#            steady step time against torch.nn.LSTM (STARTUP_ARGS: more arguments)
#
#   on the GPU machine (no network needed; bring .whl with the tree):  bash bench/startup_gpu.sh
# Prepared here beforehand (git-ignored): .whl/ (numpy 2.4.6 wheels: numba-cuda 0.30 cannot compile kernels with numpy 2.5).
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
for part in ${PARTS:-tests trace startup}; do
  echo "=== $part ($(date +%T))"
  case $part in
    tests)
      timeout "${TEST_TIMEOUT:-300}" python3 -m pytest -q -m gpu -p no:cacheprovider ${GPU_TESTS:-tests/test_gpu_kernel_cache.py \
        tests/test_gpu_step_graph.py tests/test_nonfinite.py tests/test_step_lengths_sim.py tests/test_chunked_softmax_sim.py \
        tests/test_gpu_chunked_softmax.py} 2>&1 | tee "$OUT/gpu-tests.log" ;;
    trace)
      timeout 240 python3 bench/kernel_trace.py --configs lstm:1 lstm:64 --modes lm-step lm-step-unread --iters 100 \
        --out "$OUT/lm-step-trace.json" 2>&1 | tee "$OUT/lm-step-trace.log" ;;
    host)
      timeout 120 python3 bench/step_host_profile.py --models 1x512-s1 --steps 300 --out "$OUT/step-host-profile.json" \
        --profile "$OUT/step-host-profile.txt" 2>&1 | tee "$OUT/step-host-profile.log" ;;
    startup)
      timeout 500 python3 bench/startup.py ${STARTUP_ARGS:-} --out "$OUT/startup-and-step.json" 2>&1 \
        | tee "$OUT/startup.log" ;;
  esac
done
echo "=== done ($(date +%T))"
