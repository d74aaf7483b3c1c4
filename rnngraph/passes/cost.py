"""The cost model the pipeline pass uses to choose a plan, and FLOP counts for the dump.

Constants are measured H200 facts (ARCHITECTURE.md, numba-cuda 0.30.4): a grid sync ~1.5 us; ~2 us of
fixed latency a timestep beyond the sync (the hand-written persistent LSTM at S=1, H=512 ran
3.45 us a timestep); hoisted time-batched GEMMs reach cuBLAS's ~51 TFLOP/s; a kernel replayed
from a CUDA graph costs ~1.2 us. On-chip capacity for persistent weights: 132 SMs x 227 KB.

The products inside a persistent loop are calibrated on rnngraph's own generated kernels
(bench/results/h200-20261129-loop-sweep2.json and -grid-extra.json, forward, T=100,
H=512): a timestep's recurrent products take the larger of (a) streaming their weights from L2
once per 8 streams (a work item blocks 8 streams, codegen/loop.py) at ~1.0 TB/s and (b) their
FLOPs at ~3 TFLOP/s. That fits the measured ticks within ~25%: 1 LSTM layer at S=1 ~4.3 us of
products (4 MB of weights), at S=64 ~45 us (8 x 4 MB, 134 MFLOP), a 4-layer wavefront at S=1
~25 us (7 weight matrices, 28 MB). It makes a 4-layer LSTM at S=1 run scc-sequential (measured
2.24 ms forward, 7.12 ms forward+backward) rather than wavefront (3.02 / 7.83 ms): with weights
streamed from L2, one wide tick costs as much as the narrow ticks it replaces. A loop that runs
per timestep (graph mode: a layer norm inside the recurrence) costs ~9 us a kernel a timestep
(replay plus a small kernel's run: layernorm_lstm, S=1, 4.26 ms forward for ~4 kernels a tick).
Times are estimates in microseconds for one forward window.

The wavefront is chosen only when it is estimated at least ``wavefront_lead`` (5 %) faster: the
model is good to ~25 %, it counts neither the flagged exchange that only one-stage loops get
(passes/flag_exchange.py) nor what a wide body costs beyond its syncs and products, and both
measured near-ties went to scc-sequential. 2-layer H=512 at S=1, a PyTorch training step
(bench/torch_layer.py): gru estimated 2.2 % faster as a wavefront, measured 3.13 vs 1.93 ms
(bench/results/h200-20261202-torch-layer-gru-b1-wavefront.json, -scc-sequential.json);
layernorm_lstm 2.5 % faster, measured 7.08 vs 5.67 ms
(bench/results/h200-20261202-torch-layer-ln-b1-wavefront.json, -scc-sequential.json).

These constants predate most of the loop kernels' speed-ups. Measured on an H100 since
(bench/HISTORY.md section 22): the 2 x 512 LSTM char-LM step ran 3 to 5 % faster as a wavefront
at S = 2, 8 and 16 (losses unread; 2.172 against 2.285 ms at S = 2) and 22 % slower at S = 64,
while this model keeps scc-sequential at all four; its S = 8 forward window estimate is 1.85 ms where the loops
take 1.12. There a product costs ~3 us a tick (~5.6 TFLOP/s, against 3 here), the weights stay in
shared memory (no streaming from L2), and a wavefront tick costs about its layers' ticks together:
its gain is the hoisted GEMMs between the layers. A prototype recalibration (not kept: a loop
rate of 5.6e12 FLOP/s, weights streamed only beyond the loop kernels' shared memory, one sync
fewer for a flagged exchange) kept the 2 x 512 plans at S = 1 and S >= 16 but chose the
wavefront for the two- to four-layer LSTM, GRU, peephole and layer-norm LSTM at H = 512 and
S = 2 to 8. Those measured since (bench/HISTORY.md section 23) lose as a wavefront at S = 8 -- GRU
2.895 against 3.309 ms, peephole LSTM 3.629 / 3.675, layer-norm LSTM 8.363 / 9.998, 4 x 512 LSTM
5.887 / 6.983 -- as does the 2 x 512 LSTM at S = 1 (1.623 / 2.830), so the constants stay: they
choose scc-sequential for each.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir import Graph, Node
from ..ops import LSH_OP, active_estimate, is_row_reduction


@dataclass(frozen=True)
class CostModel:
    """Machine constants (defaults: H200, see the module docstring); ``wavefront_lead``: the
    fraction by which a wavefront's estimate must beat scc-sequential's to be chosen."""

    sync_us: float = 1.5
    tick_latency_us: float = 2.0
    loop_flops_per_s: float = 3e12
    loop_weight_bytes_per_s: float = 1.0e12
    streams_per_item: int = 8
    gemm_flops_per_s: float = 51e12
    replay_us: float = 1.2
    graph_kernel_us: float = 9.0
    on_chip_bytes: int = 132 * 227 * 1024
    wavefront_lead: float = 0.05

    def tick_us(self, levels: int, flops: float, persistent: bool = True, kernels: int = 0,
                weight_bytes: int = 0, streams: int = 1) -> float:
        """One timestep of a loop body (us): syncs (or kernel replays) plus its products, the
        larger of their FLOPs (all streams) at the loop rate and their weights (bytes)
        streamed once per ``streams_per_item`` streams."""
        overhead = levels * self.sync_us + self.tick_latency_us if persistent else kernels * self.graph_kernel_us
        passes = -(-streams // self.streams_per_item)
        return overhead + max(flops / self.loop_flops_per_s, weight_bytes * passes / self.loop_weight_bytes_per_s) * 1e6

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
    if is_row_reduction(n.op):  # layer norm: the moments, then normalise and scale
        return 8 * n.size
    if n.op == "softmax_xent":
        return 4 * g.by_name[n.args[0].node].size
    if n.op == "chunked_softmax_xent":  # the output layer's product and bias, then softmax_xent's 4 a class
        classes, inputs = g.param_by_name[n.params[0]].shape
        return 2 * classes * inputs + 5 * classes
    if n.op == LSH_OP:  # training: the product and softmax over the active set only (hashing not priced)
        return 2 * active_estimate(g, n) * g.param_by_name[n.params[0]].shape[1] + 5 * active_estimate(g, n)
    if n.op in ("sigmoid", "tanh", "exp"):
        return 4 * n.size
    return n.size


def backward_flops(g: Graph, n: Node) -> int:
    """Backward FLOPs for one column: twice the forward for products (input and weight
    gradients), about twice for the rest; a chunked softmax cross-entropy three times its
    product (the chunk's logits again, then the input and weight gradients); an LSH head twice
    its product over min(min_active, classes) active classes (its training cost)."""
    if n.op == "chunked_softmax_xent":
        classes, inputs = g.param_by_name[n.params[0]].shape
        return 6 * classes * inputs + 6 * classes
    if n.op == LSH_OP:  # the input and the touched rows' gradients over the active set
        active, inputs = active_estimate(g, n), g.param_by_name[n.params[0]].shape[1]
        return 4 * active * inputs + 4 * active
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
