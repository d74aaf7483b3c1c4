#!/usr/bin/env bash
# Variable-length sequences on the GPU in one device command (run on the H200), parts chosen by
# PARTS (default "tests bench vowels"):
#   tests   the GPU tier (tests/test_gpu_lengths.py) and the CPU/simulator tests of lengths
#   bench   bench/torch_lengths.py: fastrnns' variable-length LSTM against cuDNN on a PackedSequence,
#           unidirectional and bidirectional (the cost model's plan and the wavefront forced)
#   vowels  bench/experiments/japanese_vowels_select.py: examples/japanese_vowels.py's settings
#           chosen on a validation split, then 3 seeds on the test set, on the GPU (VOWELS_ARGS:
#           more arguments, e.g. --bidirectional)
#   example examples/japanese_vowels.py with its defaults (3 seeds on the test set)
#
#   on the GPU machine (no network needed; bring .whl, .cache/rg with the tree):  bash bench/lengths_gpu.sh
# Prepared here beforehand (both git-ignored): .whl/ (numpy 2.4.6 wheels: numba-cuda 0.30 cannot compile kernels with numpy 2.5)
# and JapaneseVowels in .cache/rg/uea (RNNGRAPH_CACHE=$PWD/.cache/rg python3 -c "from rnngraph.data
# import japanese_vowels; japanese_vowels()": the machine has no network).
set -uo pipefail
source "$(dirname "$0")/gpu_env.sh"
for part in ${PARTS:-tests bench vowels}; do
  echo "=== $part ($(date +%T))"
  case $part in
    tests)
      timeout "${TEST_TIMEOUT:-240}" python3 -m pytest -q -m gpu tests/test_gpu_lengths.py 2>&1 | tee "$OUT/gpu-tests.log" ;;
    bench)
      timeout 240 python3 bench/torch_lengths.py --out "$OUT/torch-lengths-varlen-lstm.json" 2>&1 \
        | tee "$OUT/torch-lengths.log"
      timeout 240 python3 bench/torch_lengths.py --bidirectional --out "$OUT/torch-lengths-varlen-bilstm.json" 2>&1 \
        | tee "$OUT/torch-lengths-bi.log"
      timeout 240 python3 bench/torch_lengths.py --bidirectional --plan wavefront \
        --out "$OUT/torch-lengths-varlen-bilstm-wavefront.json" 2>&1 | tee "$OUT/torch-lengths-bi-wavefront.log" ;;
    example)
      timeout 200 python3 examples/japanese_vowels.py --out "$OUT/japanese-vowels-example.json" 2>&1 \
        | grep -v Warn | tee "$OUT/japanese-vowels-example.log" ;;
    vowels)
      timeout 400 python3 bench/experiments/japanese_vowels_select.py ${VOWELS_ARGS:-} --out "$OUT/japanese-vowels.json" \
        2>&1 | tee "$OUT/japanese-vowels.log" ;;
  esac
done
echo "=== done ($(date +%T))"
