"""The cost model the pipeline pass uses to choose a plan, and FLOP counts for the dump.

Constants are the measured H200 facts in DESIGN.md (numba-cuda 0.30.4): a grid sync ~1.5 us;
the hand-written persistent LSTM at S=1, H=512 ran 3.45 us a timestep, i.e. ~2 us of fixed
latency a timestep beyond the sync; cuDNN's recurrent product reaches ~7 TFLOP/s in a loop,
while hoisted time-batched GEMMs reach cuBLAS's ~51 TFLOP/s; a kernel replayed from a CUDA
graph costs ~1.2 us. On-chip capacity for persistent weights: 132 SMs x 227 KB of shared
memory. Times are estimates in microseconds for one forward window.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Graph, Node


@dataclass(frozen=True)
class CostModel:
    """Machine constants (defaults: H200, see the module docstring)."""

    sync_us: float = 1.5
    tick_latency_us: float = 2.0
    loop_flops_per_s: float = 7e12
    gemm_flops_per_s: float = 51e12
    replay_us: float = 1.2
    on_chip_bytes: int = 132 * 227 * 1024

    def tick_us(self, levels: int, flops: float, persistent: bool = True, kernels: int = 0) -> float:
        """One timestep of a loop body: syncs (or kernel replays) plus its products."""
        overhead = levels * self.sync_us + self.tick_latency_us if persistent else kernels * self.replay_us
        return overhead + flops / self.loop_flops_per_s * 1e6

    def hoisted_us(self, flops: float, kernels: int) -> float:
        """Once-per-window kernels: launches plus GEMM time at the cuBLAS rate."""
        return kernels * self.replay_us + flops / self.gemm_flops_per_s * 1e6


DEFAULT = CostModel()


def node_flops(g: Graph, n: Node) -> int:
    """Forward FLOPs of node ``n`` for one column (multiply-add = 2)."""
    if n.op == "linear":
        w = g.param_by_name[n.params[0]].shape
        return 2 * w[0] * w[1] + (w[0] if len(n.params) == 2 else 0)
    if n.op in ("input", "param", "slice", "concat", "identity", "embedding"):
        return 0
    if n.op == "layer_norm":
        return 8 * n.size
    if n.op == "softmax_xent":
        return 4 * g.by_name[n.args[0].node].size
    if n.op in ("sigmoid", "tanh", "exp"):
        return 4 * n.size
    return n.size


def backward_flops(g: Graph, n: Node) -> int:
    """Backward FLOPs for one column: twice the forward for products (input and weight
    gradients), about twice for the rest."""
    return 2 * node_flops(g, n)


def param_bytes(g: Graph, nodes, dtype_bytes: int) -> int:
    """Bytes of the weights of the linear nodes among ``nodes``."""
    total = 0
    for name in nodes:
        n = g.by_name[name]
        if n.op == "linear":
            for p in n.params:
                shape = g.param_by_name[p].shape
                size = 1
                for s in shape:
                    size *= s
                total += size * dtype_bytes
    return total
