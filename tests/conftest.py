import os
import shutil
import sys

import pytest

# Without a GPU, CUDA code runs in numba's simulator; the variable must be set before numba is
# imported, so it is set here, before any test module loads.
if not shutil.which("nvidia-smi") and "NUMBA_ENABLE_CUDASIM" not in os.environ:
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
# The simulator runs every simulated thread as a Python thread, and its block manager polls them
# for syncthreads() while holding the GIL: with CPython's default switch interval (5 ms) a block
# waits for the poller's slice to end at every barrier. 1 ms changes nothing the threads compute
# and cuts the simulator tests' CPU time by about a third (tests/test_losses_sim.py with
# tests/test_dropout.py on 2 cores: 66-72 s -> 44-47 s user + system, 76 s -> 40 s wall).
if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    sys.setswitchinterval(0.001)

sys.path.insert(0, os.path.dirname(__file__))  # tests/gradcheck.py, tests/peers/


def pytest_addoption(parser):
    parser.addoption("--regen-golden", action="store_true", help="rewrite tests/golden/*.txt from the current code")


def pytest_collection_modifyitems(config, items):
    """GPU tests skip cleanly where numba finds no CUDA device."""
    try:
        from numba import cuda
        has_gpu = cuda.is_available() and not os.environ.get("NUMBA_ENABLE_CUDASIM")
    except Exception:  # numba-cuda absent or no driver
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU present")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


#: Words of the small training text of the command-line tests (``text_file``).
WORDS = "the a of and to in her she was it that not be as for with had his you but".split()


@pytest.fixture(scope="module")
def text_file(tmp_path_factory):
    """A UTF-8 file of 80 lines of 12 random WORDS (fixed seed; about 4,500 characters)."""
    import numpy as np
    rng = np.random.default_rng(0)
    path = tmp_path_factory.mktemp("corpus") / "words.txt"
    lines = [" ".join(rng.choice(WORDS, size=12)) for _ in range(80)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def assert_same_checkpoint_arrays(a, b, atol: float = 1e-6) -> None:
    """Two loaded checkpoints (rnngraph.lm.load_checkpoint) hold the same parameter, optimizer
    and state arrays, to ``atol``."""
    import numpy as np
    for part in ("params", "optim", "state"):
        x, y = getattr(a, part), getattr(b, part)
        assert set(x) == set(y), part
        for key in x:
            np.testing.assert_allclose(y[key], x[key], rtol=0, atol=atol, err_msg=f"{part} {key}")


def run_outside_simulator(script: str, cache_dir=None, timeout: int = 600) -> dict:
    """Run ``script`` (Python source that prints a JSON object as its last line, ``{"skip":
    reason}`` where ``cuda.compile_ptx`` cannot run) in a subprocess without numba's CUDA
    simulator, with this checkout on the path (and ``RNNGRAPH_CACHE=cache_dir`` if given);
    return the object, or skip the test with the reason."""
    import json
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    if cache_dir is not None:
        env["RNNGRAPH_CACHE"] = str(cache_dir)
    proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if "skip" in result:
        pytest.skip("cuda.compile_ptx cannot run here: " + result["skip"])
    return result


#: The start of a script for :func:`run_outside_simulator` that compiles PTX for sm_90: prints
#: {"skip": reason} and exits where NVVM cannot run; patches numba's current device (none here)
#: so that device functions compile for compute capability 9.0.
PTX_PREAMBLE = r"""
import json, re, sys
import numpy as np
from numba import cuda, typeof
def probe(x):
    x[0] = 1.0
try:
    cuda.compile_ptx(probe, "void(float32[::1])", cc=(9, 0))
except Exception as e:  # no NVVM here
    print(json.dumps({"skip": f"{type(e).__name__}: {e}"[:500]}))
    sys.exit(0)
import numba.cuda.dispatcher
class _H200:  # device functions called from a kernel compile for the current device's cc: none here
    compute_capability = (9, 0)
numba.cuda.dispatcher.get_current_device = _H200
"""


def tensor_core_layer_run(cell: str, H: int, S: int, device: str, precision: str, T: int = 6,
                          flagged_exchange: bool | None = None) -> dict:
    """Forward and backward of one ``cell`` layer (hidden H, input H; rg.compile_rnn with the
    loops' products on tensor cores, ``loop_tensor_cores``, seed 4) over (T, S, H) standard
    normals with a dy of normals (seed 5): y, dx, the final states ("h_T.<name>") and the
    parameter gradients ("d.<name>"), float64 arrays by name. ``flagged_exchange`` None: only at
    S = 1 (S = 2 to 8 flag the backward loops by default, whose flagged vectors forgo the chunks
    tested with this); True or False: as given."""
    import numpy as np

    import rnngraph as rg
    net = rg.Sequential(rg.cells.STANDARD[cell](hidden=H), input_size=H)
    flags = S == 1 if flagged_exchange is None else flagged_exchange
    options = rg.ScheduleOptions.defaults(S).replace(loop_tensor_cores=True, flagged_exchange=flags)
    rnn = rg.compile_rnn(net, device=device, precision=precision, seed=4, options=options)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((T, S, H)).astype(np.float32)
    y, hT = rnn.forward(x)
    dx, _, dparams = rnn.backward(rng.standard_normal(np.shape(y)).astype(np.float32))
    out = {"y": y, "dx": dx, **{f"h_T.{k}": v for k, v in hT.items()}, **{f"d.{k}": v for k, v in dparams.items()}}
    return {k: np.asarray(v, np.float64) for k, v in out.items()}


def rollout_deviation(device: str, precision: str, H: int, S: int, T: int = 1000, loop_tensor_cores: bool = True):
    """A T-step forward of an LSTM (hidden and input H, S streams, seed 1, inputs standard normals
    of seed 0) in ``precision`` against fp32 on the same ``device``: ({state: largest |difference|
    of the final state relative to fp32's largest element}, the outputs' largest deviation over the
    last 100 steps divided by that over the first 100)."""
    import numpy as np

    import rnngraph as rg
    net = rg.Sequential(rg.cells.lstm(hidden=H), input_size=H)
    x = np.random.default_rng(0).standard_normal((T, S, H)).astype(np.float32)
    options = rg.ScheduleOptions.defaults(S).replace(loop_tensor_cores=loop_tensor_cores)
    (y0, h0), (y1, h1) = (rg.compile_rnn(net, device=device, precision=p, seed=1, options=options).forward(x, train=False)
                          for p in ("fp32", precision))
    states = {k: float(np.abs(h1[k] - h0[k]).max() / np.abs(h0[k]).max()) for k in h0}
    per_step = np.abs(np.asarray(y1) - np.asarray(y0)).max(axis=(1, 2))
    return states, float(per_step[-100:].max() / per_step[:100].max())
