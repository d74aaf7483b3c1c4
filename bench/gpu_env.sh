# Sourced by the device scripts of bench/ (torch_layer_gpu.sh, lengths_gpu.sh): the repository root
# as the working directory, $OUT made, numpy 2.4.6 from the copied .whl/ installed into /tmp/site
# (the H200 image's numpy 2.5 cannot compile numba-cuda kernels), the package run from the tree,
# RNNGRAPH_CACHE in the copied .cache/rg, and the GPU named in the log.
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 RNNGRAPH_CACHE=$PWD/.cache/rg
nvidia-smi -L
