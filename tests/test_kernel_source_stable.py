"""The generated source is the same in every process: pointwise kernels were named with Python's
salted ``hash()``, so a GRU's program text (and the content-hashed module file and cached
kernels keyed by it) differed between any two processes."""
import os
import subprocess
import sys

SCRIPT = """
import hashlib, rnngraph as rg
net = rg.Sequential(rg.cells.gru(hidden=4), rg.MSE(1), input_size=2)
step = rg.compile(net, window=2, streams=2, device="cuda")
print(hashlib.sha256(step.kernels.encode()).hexdigest())
"""


def test_generated_source_does_not_depend_on_the_hash_seed():
    digests = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "NUMBA_ENABLE_CUDASIM": "1"}
        out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300,
                             cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        assert out.returncode == 0, out.stderr[-2000:]
        digests.add(out.stdout.strip().splitlines()[-1])
    assert len(digests) == 1
