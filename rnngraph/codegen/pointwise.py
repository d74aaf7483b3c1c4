"""Emit numba.cuda source for fused pointwise kernels, forward and backward.

A fused kernel computes, for one column (timestep t, stream s) and one *unit* j, every element
of its nodes that belongs to unit j: a node of size m*u has elements j, j+u, ..., j+(m-1)u,
held in locals (``n7_0 .. n7_{m-1}``). The unit u is the gcd of every size and slice offset
the kernel touches, so slices and concats only rename locals, and values stay in registers;
only the schedule's ``writes`` go to memory. The backward kernel recomputes the forward from
the kernel's inputs, then sweeps the ops in reverse, adding each VJP (the op registry's CUDA
templates) into local gradients; gradients of values from outside the kernel are added to
their global gradient buffers once, at the end. A row reduction's code (layer norm, inside
persistent loops only) comes from its entry in codegen/row_reductions.py.

Buffers: ``V<k>`` holds node k's values, ``G<k>`` its gradients, both (D + T, S, n) float32
where D is the node's state depth (rows 0..D-1 hold the history, so a read at t - d is row
D + t - d); ``P<k>`` is parameter k of the graph (vector params are read per element).
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import ops
from ..ir import Graph, Node, Ref
from ..passes.ownership import kernel_unit
from ..passes.twin_biases import written_once

F32 = {"ONE": "float32(1.0)", "ZERO": "float32(0.0)"}


def f32(value: float) -> str:
    """A float32 constant (a bare float literal would be float64 on the GPU)."""
    return f"float32({float(value)!r})"


def template(text: str, **fields) -> str:
    """Fill an op's CUDA template; ONE/ZERO become float32 constants."""
    out = text.format(**fields)
    for k, v in F32.items():
        out = out.replace(k, v)
    return out


#: generated-code names of a program's stream order and of its streams within their lengths at
#: each step (codegen/buffers.py ``Buffers.order``, ``Buffers.valid_streams``)
STREAM_ORDER, VALID_STREAMS = "O0", "O1"


@dataclass(frozen=True)
class Names:
    """Identifiers of a graph's buffers in generated code."""

    graph: Graph

    def idx(self, node: str) -> int:
        return self.graph.nodes.index(self.graph.by_name[node])

    def value(self, node: str) -> str:
        return f"V{self.idx(node)}"

    def grad(self, node: str) -> str:
        return f"G{self.idx(node)}"

    def param(self, name: str) -> str:
        return f"P{[p.name for p in self.graph.params].index(name)}"

    def param_grad(self, name: str) -> str:
        return f"Q{[p.name for p in self.graph.params].index(name)}"

    def ln_sums(self, node: str) -> str:
        """Forward row sums of a layer norm inside a persistent loop, (T, S, 2): sum(x - K) and
        sum((x - K)^2) per column, K of codegen/layer_norm_fused.py's ``ln_shift``."""
        return f"N{self.idx(node)}"

    def ln_grad_sums(self, node: str) -> str:
        """Backward row sums of a layer norm inside a persistent loop, (T, S, 2): sum(g * gain)
        and sum(g * gain * xhat) per column."""
        return f"M{self.idx(node)}"

    def depth(self, node: str) -> int:
        s = self.graph.state_of_node.get(node)
        return s.depth if s else 0


def _row_code(op: str):
    """The CUDA pieces of row reduction ``op`` (codegen/row_reductions.py; imported when first
    used: those pieces build on this module)."""
    from .row_reductions import row_code
    return row_code(op)


def local_grad(param_grad: str) -> str:
    """The name of a persistent loop kernel's shared-memory sums of gradient buffer ``Q<i>``."""
    return "Z" + param_grad[1:]


class PointwiseEmitter:
    """Emits the device functions ``{name}_fwd`` and ``{name}_bwd`` of one fused kernel.

    ops: node names in order; writes: nodes stored to memory (forward) / whose gradient
    buffers hold contributions from other kernels (backward).
    """

    def __init__(self, g: Graph, name: str, kops, writes, recompute=None, local_param_grads: bool = False,
                 deferred=frozenset(), prefetch=frozenset(), flagged=None, fastmath: bool = False):
        self.g, self.name, self.ops = g, name, tuple(kops)
        # the device functions' decorator: numba's fastmath for them too (``fast``, codegen/tuning.py)
        self.decorator = f"@cuda.jit(device=True, inline=True{', fastmath=True' if fastmath else ''})"
        # value buffer -> its flag buffer (persistent loops, passes/flag_exchange.py): each store
        # to the value is also stored with its tag (codegen/flag_exchange.py's ``flag_store``)
        self.flagged = dict(flagged or {})
        # buffers whose loads may be issued early, by ``{fn}_load`` (persistent loops, ``prefetch``
        # of codegen/tuning.py): :meth:`prefetch_functions`
        self.prefetch = frozenset(prefetch)
        self.early: dict[str, str] = {}  # a load line of a ``prefetch`` buffer -> its variable
        self.loaded: dict[str, str] = {}  # every load line of :meth:`load` -> its buffer
        self.written: set[str] = set()  # buffers the functions store to
        # backward of a persistent loop kernel: layer norms add their gain and bias gradients into
        # the block's shared-memory sums ``Z<i>`` of ``Q<i>`` at the work item's place ``rem``
        # (an extra argument) instead of global atomics; the kernel adds them up at its end
        self.local_param_grads = local_param_grads
        # layer norms whose gain and bias gradients are not summed here at all: a kernel after the
        # loop sums them over the window (``Loop.post_sums``, codegen/ln_param_grads.py)
        self.deferred = frozenset(deferred)
        self.inside = set(self.ops)
        # the backward recomputes the whole forward kernel these ops came from (its other values
        # never reached memory), then sweeps only ``kops``
        self.recompute = tuple(recompute) if recompute else self.ops
        self.computed = set(self.recompute)
        self.writes = [w for w in writes if w in self.inside]
        self.u = kernel_unit(g, self.recompute)
        self.names = Names(g)
        # gradients this kernel alone writes whole once a step (passes/twin_biases.py): stored
        # without reading the old value (the gradient arena leaves them unzeroed)
        self.written_once = written_once(g, {n.name for n in g.nodes if self.names.grad(n.name) in self.flagged})
        self.buffers: set[str] = set()
        self.lines: list[str] = []

    # ------------------------------------------------------------------ helpers
    def chunks(self, node: str) -> int:
        return self.g.by_name[node].size // self.u

    def local(self, node: str, i: int) -> str:
        return f"n{self.names.idx(node)}_{i}"

    def index(self, node: str, delay: int, i: int) -> str:
        row = self.names.depth(node) - delay
        return f"[{row} + t, s, j + {i * self.u}]" if row else f"[t, s, j + {i * self.u}]"

    def emit(self, line: str) -> None:
        self.lines.append("    " + line)

    def load(self, var: str, buf: str, idx: str, at: int | None = None) -> None:
        """Emit ``var = buf[idx]`` (at line ``at``, default the end), noting it as an early load
        when ``buf`` is a ``prefetch`` buffer."""
        line = f"    {var} = {buf}{idx}"
        self.lines.insert(len(self.lines) if at is None else at, line)
        self.buffers.add(buf)
        self.loaded[line] = buf
        if buf in self.prefetch:
            self.early[line] = var

    def store(self, buf: str, idx: str, value: str) -> None:
        self.emit(f"{buf}{idx} = {value}")
        self.buffers.add(buf)
        self.written.add(buf)
        if buf in self.flagged:
            F = self.flagged[buf]
            self.emit(f"flag_store({F}, {idx[1:-1]}, {value})")
            self.buffers.add(F)

    def _alias(self, n: Node) -> dict[int, tuple]:
        """Chunk i of a slice/concat node -> (arg ref, chunk of the arg)."""
        out = {}
        if n.op == "slice":
            r = n.args[0]
            for i in range(self.chunks(n.name)):
                out[i] = (r, n.attr["start"] // self.u + i)
        elif n.op == "concat":
            i = 0
            for r in n.args:
                for c in range(self.g.by_name[r.node].size // self.u):
                    out[i] = (r, c)
                    i += 1
        return out

    def operand(self, ref, i: int, loaded: dict) -> str:
        """The expression of chunk i of an argument (a local, a loaded global, or a parameter)."""
        node = self.g.by_name[ref.node]
        if ref.node in self.computed and ref.delay == 0:
            return self.local(ref.node, i)
        key = (ref.node, ref.delay, i)
        if key not in loaded:
            var = f"x{self.names.idx(ref.node)}_{ref.delay}_{i}"
            if node.op == "param":
                buf = self.names.param(node.params[0])
                self.load(var, buf, f"[j + {i * self.u}]")
            else:
                buf = self.names.value(ref.node)
                self.load(var, buf, self.index(ref.node, ref.delay, i))
            loaded[key] = var
        return loaded[key]

    def forward_body(self) -> dict:
        """Emit the forward computation into locals; returns the loaded-operand table."""
        loaded: dict = {}
        for name in self.recompute:
            n = self.g.by_name[name]
            alias = self._alias(n)
            if ops.is_row_reduction(n.op):  # its code: codegen/row_reductions.py
                _row_code(n.op).forward(self, n, loaded)
                continue
            for i in range(self.chunks(name)):
                if alias:
                    ref, c = alias[i]
                    expr = self.operand(ref, c, loaded)
                else:
                    fwd, _ = ops.REGISTRY[n.op].cuda
                    xs = {f"x{k}": self.operand(r, i, loaded) for k, r in enumerate(n.args)}
                    value = n.attr.get("value")
                    expr = template(fwd, **xs, value=f32(value) if value is not None else "")
                self.emit(f"{self.local(name, i)} = {expr}  # {name}[{i}]" if i == 0 else
                          f"{self.local(name, i)} = {expr}")
        return loaded

    def signature(self, fn: str) -> str:
        rem = "rem, " if self.local_param_grads else ""
        return f"def {fn}(t, s, j, {rem}{', '.join(sorted(self.buffers, key=buffer_key))}):"

    # ------------------------------------------------------------------ emitters
    def forward(self) -> str:
        """Source of ``{name}_fwd(t, s, j, buffers...)``, a device function."""
        self.lines, self.buffers = [], set()
        self.forward_body()
        for w in self.writes:
            buf = self.names.value(w)
            for i in range(self.chunks(w)):
                self.store(buf, self.index(w, 0, i), self.local(w, i))
        return self._function(f"{self.name}_fwd")

    def backward(self) -> str:
        """Source of ``{name}_bwd(t, s, j, buffers...)``: recompute, then the reverse sweep."""
        self.lines, self.buffers = [], set()
        loaded = self.forward_body()
        for name in self.ops:
            for i in range(self.chunks(name)):
                if name in self.writes:
                    self.load(f"g{self.local(name, i)}", self.names.grad(name), self.index(name, 0, i))
                else:
                    self.emit(f"g{self.local(name, i)} = float32(0.0)")
        external: dict[tuple, str] = {}

        def target(ref, c) -> str:
            if ref.node in self.inside and ref.delay == 0:
                return f"g{self.local(ref.node, c)}"
            key = (ref.node, ref.delay, c)
            if key not in external:
                external[key] = f"d{self.names.idx(ref.node)}_{ref.delay}_{c}"
                self.emit(f"{external[key]} = float32(0.0)")
            return external[key]

        for name in reversed(self.ops):
            n = self.g.by_name[name]
            alias = self._alias(n)
            if ops.is_row_reduction(n.op):
                _row_code(n.op).backward(self, n, loaded, target)
                continue
            for i in range(self.chunks(name)):
                g = f"g{self.local(name, i)}"
                if alias:
                    ref, c = alias[i]
                    tgt = target(ref, c)
                    self.emit(f"{tgt} = {tgt} + {g}")
                    continue
                _, vjps = ops.REGISTRY[n.op].cuda
                xs = {f"x{k}": self.operand(r, i, loaded) for k, r in enumerate(n.args)}
                value = n.attr.get("value")
                for k, r in enumerate(n.args):
                    if not self.g.differentiable(r.node):  # token ids, dropout masks
                        continue
                    expr = template(vjps[k], **xs, g=g, y=self.local(name, i),
                                    value=f32(value) if value is not None else "")
                    tgt = target(r, i)
                    self.emit(f"{tgt} = {tgt} + ({expr})")
        # a flagged gradient (passes/flag_exchange.py) is polled whole by a GEMM: its one writer in
        # the loop (this kernel, if it adds to any chunk of it) also stores the chunks it adds
        # nothing to (a slice used after the loop, or by no one), their old value with its tag
        # (regression: such a GEMM waited forever). Other kernels leave it alone.
        for buf in self.flagged:
            node = self.g.nodes[int(buf[1:])].name
            if buf == self.names.grad(node) and any(key[:2] == (node, 0) for key in external):
                for c in range(self.chunks(node)):
                    target(Ref(node), c)
        # accumulate into the gradient buffers: their old values are read at the top of the
        # function, the sums written at the end. The targets are distinct elements no one else
        # writes meanwhile, but the compiler must assume the arrays alias, so ``+=`` one after the
        # other waits a full memory round trip per target (3.1 of the 9.4 us LSTM S=1 backward
        # timestep, bench/loop_profile.py); this way the reads overlap each other and the math.
        loads = 0
        for (node, delay, c), var in sorted(external.items()):
            buf = self.names.grad(node)
            idx = f"[t, s, j + {c * self.u}]" if self.g.by_name[node].op == "param" else self.index(node, delay, c)
            if node in self.written_once and delay == 0:
                self.store(buf, idx, var)
                continue
            self.load(f"o{var}", buf, idx, at=loads)
            loads += 1
            self.store(buf, idx, f"o{var} + {var}")
        return self._function(f"{self.name}_bwd")

    def _function(self, fn: str) -> str:
        head = [self.decorator, self.signature(fn)]
        return "\n".join(head + (self.lines or ["    pass"])) + "\n"

    def early_buffers(self) -> list[str]:
        """The buffers of the early loads (``{fn}_load``'s parameters after t, s, j), sorted."""
        return sorted({self.loaded[line] for line in self.early}, key=buffer_key)

    def prefetch_functions(self, fn: str) -> str:
        """After :meth:`forward` or :meth:`backward` made ``fn``: the source of ``{fn}_load(t, s, j,
        *early_buffers)``, returning the tuple of the ``prefetch`` buffers' loads, and of
        ``{fn}_pre(t, s, j, pf, [rem,] buffers...)``, ``fn`` with those values taken from the tuple
        ``pf`` instead (a persistent loop issues the loads a level early, codegen/loop.py). Empty when
        there is no such load."""
        if not self.early:
            return ""
        names = ", ".join(self.early.values()) + ","
        rest = [line for line in self.lines if line not in self.early]
        load = [self.decorator,
                f"def {fn}_load(t, s, j, {', '.join(self.early_buffers())}):", *self.early, f"    return ({names})"]
        pre = [self.decorator, self.signature(f"{fn}_pre").replace("(t, s, j, ", "(t, s, j, pf, "),
               f"    {names.rstrip(',')} = pf" if len(self.early) > 1 else f"    {names[:-1]}, = pf", *rest]
        return "\n".join(load) + "\n\n\n" + "\n".join(pre) + "\n"


def buffer_key(name: str) -> tuple:
    """Sort key of a generated-code buffer name (``V12``, ``Q3``, ...): kind letter, then index."""
    return (name[0], int(name[1:]))


def phase_kernel(fn: str, device_fn: str, buffers: list[str], unit: int) -> str:
    """A global kernel running ``device_fn`` for every (column, unit) of a window: columns
    c in [0, T*S) with t = c // S, s = c % S; launch with at least T*S*unit threads."""
    args = ", ".join(buffers)
    return (f"@cuda.jit\n"
            f"def {fn}(T, S, {args}):\n"
            f"    idx = cuda.grid(1)\n"
            f"    if idx < T * S * {unit}:\n"
            f"        c = idx // {unit}\n"
            f"        j = idx - c * {unit}\n"
            f"        t = c // S\n"
            f"        s = c - t * S\n"
            f"        {device_fn}(t, s, j, {args})\n")


def step_kernel(fn: str, device_fn: str, buffers: list[str], unit: int) -> str:
    """A global kernel running ``device_fn`` at one timestep ``t`` for every (stream, unit)."""
    args = ", ".join(buffers)
    return (f"@cuda.jit\n"
            f"def {fn}(t, S, {args}):\n"
            f"    idx = cuda.grid(1)\n"
            f"    if idx < S * {unit}:\n"
            f"        s = idx // {unit}\n"
            f"        j = idx - s * {unit}\n"
            f"        {device_fn}(t, s, j, {args})\n")


PRELUDE = '''"""Generated by rnngraph.codegen: do not edit (the file name is a hash of this text)."""
import math

from numba import cuda, float32, uint64


@cuda.jit(device=True, inline=True)
def sigmoid(x):
    if x >= float32(0.0):
        return float32(1.0) / (float32(1.0) + math.exp(-x))
    e = math.exp(x)
    return e / (float32(1.0) + e)
'''
