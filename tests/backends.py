"""Comparing two backends' results in tests: CompiledRNN.backward's (dx, dh0, dparams), a
forward and backward with lengths, and two training steps' parameters and carried states."""
import numpy as np


def assert_backward_close(want: tuple, got: tuple, atol: float) -> None:
    """``got`` = (dx, dh0, dparams) equals ``want`` within ``atol``, naming the state or
    parameter that differs."""
    (dx1, dh1, dp1), (dx2, dh2, dp2) = want, got
    np.testing.assert_allclose(dx2, dx1, atol=atol)
    for k in dh1:
        np.testing.assert_allclose(dh2[k], dh1[k], atol=atol, err_msg=k)
    for k in dp1:
        np.testing.assert_allclose(dp2[k], dp1[k], atol=atol, err_msg=k)


def assert_lengths_run_close(cpu, gpu, x, h0: dict, lengths, rng) -> None:
    """Two CompiledRNNs (``cpu`` the reference) over (x, h0) with ``lengths``: outputs and final
    states within 2e-6, then the backward of a standard normal dy (from ``rng``) within 2e-5."""
    (y1, h1), (y2, h2) = cpu.forward(x, h0, lengths=lengths), gpu.forward(x, h0, lengths=lengths)
    np.testing.assert_allclose(y2, y1, atol=2e-6)
    for k in h1:
        np.testing.assert_allclose(h2[k], h1[k], atol=2e-6, err_msg=k)
    dy = rng.standard_normal(y1.shape).astype(np.float32)
    assert_backward_close(cpu.backward(dy, {}), gpu.backward(dy, {}), atol=2e-5)


def assert_steps_close(ours, theirs, atol: float) -> None:
    """Two TrainingSteps hold the same parameters and carried states within ``atol``, naming the
    one that differs."""
    for got, want in ((ours.parameters, theirs.parameters), (ours.state, theirs.state)):
        for name in want:
            np.testing.assert_allclose(got[name], want[name], atol=atol, err_msg=name)
