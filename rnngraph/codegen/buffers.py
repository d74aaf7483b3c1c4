"""The device buffers of one compiled schedule (codegen/program.py's ``CudaProgram``).

Buffers (float32): ``V[node]`` and ``G[node]`` of shape (D + T, S, n) (for the nodes whose values
and gradients cross a kernel boundary: ``Schedule.value_nodes`` / ``gradient_nodes``), rows 0..D-1 holding the
state history (so a read at t - d is row D + t - d); token ids (T, S) int32; params ``P`` and
their gradients ``PG`` in their declared shapes; ``PT`` the transposed copies of the weights a
persistent loop kernel reads; ``LN`` a layer norm's row sums inside a persistent loop; ``order``
the streams in the order the loop kernels' GEMM work items take them (int32 (S,), a permutation)
and ``valid_streams`` how many of them, in that order, are within their lengths at each step
(int32 (T,)): identity and S until :meth:`Buffers.set_stream_order` sets them (codegen/tuning.py
``skip``). The gradients live in one arena and the parameter gradients in another, so that one
launch zeroes each; parameters the buffers allocate themselves live in a third
(``param_arena``), laid out as the parameter gradients' arena, so that one launch updates them
all (codegen/step.py). ``lookup`` maps a generated-code buffer name (``V<k>``, ``G<k>``, ...) to
its array.
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from ..ir import INDEX, Graph
from .device import blocks
from .kernel_cache import cached
from .pointwise import STREAM_ORDER, VALID_STREAMS, Names


def arena(views: dict, shapes: dict, stream, align: int = 1):
    """One float32 device allocation holding every array of ``shapes``; fills ``views`` with
    reshaped slices of it and returns the flat arena. ``align``: each array starts at a multiple
    of that many floats (4 for the gradients: the tensor-core loops read them with 16-byte loads,
    codegen/loop_mma.py); 1 packs them (the parameter arenas: optimizers and the torch layer
    split them by size)."""
    starts, off = arena_starts(shapes, align)
    arena = cuda.device_array(max(1, off), np.float32, stream=stream)
    for k, shape in shapes.items():
        views[k] = arena[starts[k]:starts[k] + int(np.prod(shape))].reshape(shape)
    return arena


def arena_starts(shapes: dict, align: int = 1) -> tuple[dict, int]:
    """Where :func:`arena` puts each array of ``shapes`` (name -> first float) and its length in
    floats."""
    starts, off = {}, 0
    for k, shape in shapes.items():
        starts[k], off = off, -(-(off + int(np.prod(shape))) // align) * align
    return starts, off


def _transpose_kernel(src, dst):
    i, j = cuda.grid(2)
    if i < src.shape[0] and j < src.shape[1]:
        dst[j, i] = src[i, j]


_transpose = cached(cuda.jit(_transpose_kernel))


class Buffers:
    """Device arrays of one compiled schedule (see the module docstring). ``params`` (name ->
    float32 device array of the parameter's shape) makes several programs share one set of
    parameters (programs for other (T, S), rnngraph/layer.py); by default each allocates its own.
    ``grad_nodes``: the float nodes that get a gradient buffer (the schedule's
    ``gradient_nodes``: a fused kernel keeps the others' gradients in registers), ``value_nodes``
    those that get a value buffer (``value_nodes``; :meth:`ensure_values` adds more); None: every
    float node. Reading another node's gradient or value is a KeyError naming it. ``unzeroed``:
    gradients the backward writes whole each step without reading them (passes/twin_biases.py
    ``written_once``), placed last in the gradient arena so that ``zeroed_grads``, the part a step
    zeroes, leaves them out (None or empty: ``zeroed_grads`` is the whole arena)."""

    def __init__(self, g: Graph, T: int, S: int, stream, params: dict | None = None,
                 grad_nodes: tuple | None = None, value_nodes: tuple | None = None, unzeroed=None):
        self.g, self.T, self.S, self.names = g, T, S, Names(g)
        self.V, self.G, self.P, self.PG, self.PT = {}, {}, {}, {}, {}
        floats = [n for n in g.nodes if n.dtype != INDEX]
        shapes = {n.name: (self.names.depth(n.name) + T, S, n.size) for n in floats}
        self._shapes, self.stream = shapes, stream
        for n in g.nodes:
            if n.dtype == INDEX:
                self.V[n.name] = cuda.device_array((T, S), np.int32, stream=stream)
        self.ensure_values(list(shapes) if value_nodes is None else value_nodes)
        # gradients live in one arena (and parameter gradients in another), zeroed by one launch each;
        # with grad_nodes (Schedule.gradient_nodes) only those nodes' gradients
        graded = shapes if grad_nodes is None else {k: shapes[k] for k in grad_nodes}
        unzeroed = frozenset(unzeroed or ())
        last = [k for k in graded if k in unzeroed]
        graded = {k: graded[k] for k in [k for k in graded if k not in unzeroed] + last}
        self.grad_arena = arena(self.G, graded, stream, align=4)
        starts, size = arena_starts(graded, align=4)
        #: the gradients left out of ``zeroed_grads`` (their programs' backward must write them whole)
        self.unzeroed = frozenset(last)
        #: the part of ``grad_arena`` a step zeroes: all but the ``unzeroed`` gradients
        self.zeroed_grads = self.grad_arena[:max(1, starts[last[0]] if last else size)]
        self.param_grad_arena = arena(self.PG, {p.name: p.shape for p in g.params}, stream)
        if params is None:  # element i of param_arena is element i of param_grad_arena
            self.param_arena = arena(self.P, {p.name: p.shape for p in g.params}, stream)
        else:  # another program's (or the caller's) arrays: not one allocation of ours
            self.param_arena = None
            self.P.update({p.name: params[p.name] for p in g.params})
        self.order = cuda.to_device(np.arange(S, dtype=np.int32), stream=stream)
        self.valid_streams = cuda.to_device(np.full(T, S, np.int32), stream=stream)
        self.LN: dict[str, tuple] = {}  # layer norm in a persistent loop -> (forward, backward) row sums

    def ensure_values(self, nodes) -> None:
        """Allocate the value buffers of the float ``nodes`` that have none yet (a program that
        stores more values, e.g. every one, run on these buffers: codegen/program.py)."""
        for name in nodes:
            if name not in self.V:
                self.V[name] = cuda.device_array(self._shapes[name], np.float32, stream=self.stream)

    def value(self, node: str):
        """The value buffer of ``node``; KeyError naming it where it has none (``value_nodes``)."""
        if node not in self.V:
            if self.g.by_name[node].op == "param":  # a fused kernel reads its parameter directly
                raise KeyError(f"node {node!r} is a param() vector that a layer norm or matrix product reads "
                               f"whole: the CUDA backend needs an identity node between them (as rg.layer_norm "
                               f"and rg.linear put in a traced cell; the CPU backend runs either)")
            raise KeyError(f"node {node!r} has no value buffer: its value stays inside a fused kernel "
                           f"(Schedule.value_nodes leaves it out)")
        return self.V[node]

    def ln_sums(self, node: str) -> tuple:
        """The (T, S, 2) row-sum buffers of a layer norm inside a persistent loop (forward sums,
        backward sums; zeroed by the loop kernels themselves), allocated on first use."""
        if node not in self.LN:
            self.LN[node] = tuple(cuda.device_array((self.T, self.S, 2), np.float32, stream=self.stream)
                                  for _ in range(2))
        return self.LN[node]

    def set_stream_order(self, order: np.ndarray, valid_streams: np.ndarray, staging=None) -> None:
        """The streams in the order the loop kernels' GEMM work items take them and how many of
        them are within their lengths at each step, host arrays (S,) and (T,) of
        rnngraph.lengths.stream_order: only the work items over those streams do their products
        (codegen/tuning.py ``skip``). The first ``valid_streams[t]`` of ``order`` must hold every
        stream within its length at t. Enqueued on the buffers' stream, through ``staging``'s
        pinned buffers (codegen/host_copies.py ``Staging``) when given."""
        for key, dst, src in (("stream order", self.order, order), ("valid streams", self.valid_streams, valid_streams)):
            if staging is not None:
                staging.to_device(key, dst, src)
            else:
                dst.copy_to_device(np.ascontiguousarray(src, dtype=np.int32), stream=self.stream)

    def add_transposed(self, param: str, stream) -> None:
        """Keep a transposed copy ``PT[param]`` (refresh it with :meth:`refresh_transposed`)."""
        if param not in self.PT:
            rows, cols = self.P[param].shape
            self.PT[param] = cuda.device_array((cols, rows), np.float32, stream=stream)

    def refresh_transposed(self, stream) -> None:
        """Copy every weight into its transposed buffer (after each update of the weights)."""
        for name, dst in self.PT.items():
            src = self.P[name]
            _transpose[(blocks(src.shape[0], 16), blocks(src.shape[1], 16)), (16, 16), stream](src, dst)

    def lookup(self, name: str):
        """The array behind a generated-code buffer name (V<k>, G<k>, P<k>; T<k> a transposed
        weight, Q<k> a parameter gradient, N<k>/M<k> a layer norm's forward/backward row sums,
        O0/O1 the stream order and valid streams)."""
        kind, k = name[0], int(name[1:])
        if kind == "P":
            return self.P[self.g.params[k].name]
        if kind == "T":
            return self.PT[self.g.params[k].name]
        if kind == "Q":
            return self.PG[self.g.params[k].name]
        if kind in "NM":
            return self.ln_sums(self.g.nodes[k].name)[kind == "M"]
        if name in (STREAM_ORDER, VALID_STREAMS):
            return self.order if name == STREAM_ORDER else self.valid_streams
        node = self.g.nodes[k].name
        return self.value(node) if kind == "V" else self.grad(node)

    def grad(self, node: str):
        """The gradient buffer of ``node``; KeyError naming it where it has none (``grad_nodes``)."""
        if node not in self.G:
            raise KeyError(f"node {node!r} has no gradient buffer: its gradient stays inside a fused kernel "
                           f"(Schedule.gradient_nodes leaves it out)")
        return self.G[node]

    def window(self, node: str, delay: int = 0, grad: bool = False):
        """(T*S, n) view of a node over the window, read with ``delay``."""
        buf = self.grad(node) if grad else self.value(node)
        D = self.names.depth(node)
        return buf[D - delay:D - delay + self.T].reshape(self.T * self.S, buf.shape[2])

    def at(self, node: str, t: int, delay: int = 0, grad: bool = False):
        """(S, n) view of a node at timestep t - delay."""
        buf = self.grad(node) if grad else self.value(node)
        return buf[self.names.depth(node) + t - delay]
