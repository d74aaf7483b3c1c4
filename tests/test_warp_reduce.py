"""The transpose (reduce-scatter) warp reduction of codegen/warp_reduce.py, run line by line for
32 lanes in lockstep in plain Python (the CUDA simulator has no warp shuffles): every sum must
land in the lane the returned index names, and each index must have exactly one storing lane."""
import re
from types import SimpleNamespace

import numpy as np
import pytest

from rnngraph.codegen.warp_reduce import transpose_reduce

SHFL = re.compile(r"cuda\.shfl_xor_sync\(0xFFFFFFFF, (.+), (\d+)\)$")


def _selp(test, a, b):
    """The generated lines' ``cuda.selp``, which numba types only for two values of one type."""
    assert type(a) is type(b), (a, b)
    return a if test else b


CUDA = SimpleNamespace(selp=_selp)


def _run_warp(lines, values):
    """Execute straight-line ``lines`` for 32 lanes; ``values[lane][name]`` are the inputs."""
    envs = [dict(values[lane], lane=lane, float32=np.float64, cuda=CUDA) for lane in range(32)]
    for line in lines:
        m = SHFL.search(line)
        if m is None:
            for env in envs:
                exec(line, {}, env)
            continue
        expr, off = m.group(1), int(m.group(2))
        sent = [eval(expr, {}, env) for env in envs]  # every lane's operand, before anyone writes
        local = line[:m.start()] + "_recv"
        for lane, env in enumerate(envs):
            env["_recv"] = sent[lane ^ off]
            exec(local, {}, env)
    return envs


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 16, 24, 32])
def test_transpose_reduce_sums_each_value_into_the_lane_its_index_names(n):
    rng = np.random.default_rng(n)
    names = [f"acc{i}" for i in range(n)]
    data = rng.normal(size=(32, n))
    lines, index, leader = transpose_reduce(names)
    envs = _run_warp(lines, [{nm: data[lane, i] for i, nm in enumerate(names)} for lane in range(32)])
    stored = {}
    for env in envs:
        i = eval(index, {}, env)
        if i < n:
            np.testing.assert_allclose(env["red"], data[:, i].sum(), rtol=1e-12)  # every lane of the group
        if eval(leader, {}, env) and i < n:
            assert i not in stored, f"index {i} stored twice"
            stored[i] = env["red"]
    assert sorted(stored) == list(range(n))


def test_transpose_reduce_uses_fewer_shuffles_than_one_tree_per_value():
    lines, _, _ = transpose_reduce([f"a{i}" for i in range(32)])
    assert sum("shfl_xor_sync" in line for line in lines) == 31  # vs 5 * 32 = 160 for the trees


def test_transpose_reduce_rejects_more_than_a_warp_of_values():
    with pytest.raises(ValueError, match="1 to 32"):
        transpose_reduce([f"a{i}" for i in range(33)])
