"""Launches of the fixed library kernels on one program's buffers (codegen/program.py's
``CudaProgram``): GEMMs and weight-gradient GEMMs (codegen/library.py: cuBLAS where CuPy is
present, else numba's GEMM), embedding gather and scatter, the losses (their registry entry's
``cuda_loss`` launchers in codegen/losses.py) and the row reductions' library kernels
(codegen/row_reductions.py).

Each runs over the whole window (``t`` None: (T*S, n) views) or at one timestep ``t`` of a
per-timestep loop ((S, n) views, captured into a CUDA graph). Views and GEMM arguments are
prepared once where a launcher is returned: the buffers never move.
"""
from __future__ import annotations

from dataclasses import replace

from .. import ops
from ..ir import INDEX
from . import library, losses
from .buffers import Buffers
from .row_reductions import row_code


class LibraryLaunches:
    """The library kernels of the graph of ``buf`` (a :class:`Buffers`), launched on ``stream``;
    ``precision`` (rnngraph/precision.py): the operand format of the GEMMs over the whole window
    (forward and input-gradient products of the phases, weight gradients); ``loop_precision``
    that of a per-timestep loop's GEMMs (rnngraph/schedule.py ``loop_precision``: fp32 unless the
    schedule puts the loops' products on tensor cores, as the persistent loops' in-kernel
    products)."""

    def __init__(self, buf: Buffers, stream, precision: str = "fp32", loop_precision: str = "fp32",
                 folded: dict[str, str] | None = None, twins: dict[str, str] | None = None):
        self.buf, self.stream, self.g, self.precision = buf, stream, buf.g, precision
        self.loop_precision = loop_precision
        #: loop product -> the window product whose bias it adds (passes/folded_biases.py): the
        #: window product's launcher adds no bias; a per-timestep launch of the loop product adds both
        self.folded = dict(folded or {})
        self._window_folded = set(self.folded.values())
        #: loss node -> (forward, backward) launchers used instead of its registry entry's while
        #: set (an rg.LSHSoftmax head's sparse training loss: codegen/lsh_step.py)
        self.loss_overrides: dict[str, tuple] = {}
        #: linear node -> the twin whose bias gradient its column sum also fills, as the schedule
        #: decided (passes/twin_biases.py ``scheduled_twins``; none where not given)
        self.twins = dict(twins or {})
        self._summed_by_twin = set(self.twins.values())

    def views(self, t: int | None):
        """view(node, grad=False, delay=0): the (T*S, n) window (t None) or the (S, n) timestep t."""
        b = self.buf
        if t is None:
            return lambda node, grad=False, delay=0: b.window(node, delay, grad)
        return lambda node, grad=False, delay=0: b.at(node, t, delay, grad)

    def ids(self, node: str, t: int | None):
        """Token ids of an index input: (T*S,) over the window or (S,) at timestep t."""
        v = self.buf.V[node]
        return v.reshape(self.buf.T * self.buf.S) if t is None else v[t]

    def gemm(self, n, backward: bool, t: int | None = None) -> None:
        """A linear node at timestep t, inside a per-timestep loop (captured into a CUDA graph)."""
        self.gemm_launcher(n, backward, t)()

    def gemm_launcher(self, n, backward: bool, t: int | None = None):
        """A linear node over the whole window (t None) or at timestep t (a per-timestep loop,
        captured into a CUDA graph: codegen/cublas.py calls cuBLAS so that it can be), its views
        and GEMM arguments prepared once (buffers never move): returns the function that launches
        it (cuBLAS where CuPy is present, else the numba GEMM)."""
        b, r, view = self.buf, n.args[0], self.views(t)
        W = b.P[n.params[0]]
        precision = self.precision if t is None else self.loop_precision
        if backward:
            run, _ = library.gemm_launcher(view(n.name, grad=True), W, view(r.node, grad=True, delay=r.delay),
                                           beta=1.0, stream=self.stream, precision=precision)
            return run
        out = view(n.name)
        run, _ = library.gemm_launcher(view(r.node, delay=r.delay), W, out, trans_b=True, stream=self.stream,
                                       precision=precision)
        biases = [b.P[n.params[1]]] if len(n.params) == 2 and not (t is None and n.name in self._window_folded) else []
        if t is not None and n.name in self.folded:  # a folded loop run per timestep (not persistent)
            biases.append(b.P[self.g.by_name[self.folded[n.name]].params[1]])
        if not biases:
            return run
        return lambda: (run(), *(library.add_bias(out, bias, stream=self.stream) for bias in biases))

    def wgrad_launcher(self, n):
        """A weight-gradient GEMM (and bias column sum) over the window, prepared once. The bias
        gradient of a twin (passes/twin_biases.py) is summed by its partner's launcher, into both."""
        b, r = self.buf, n.args[0]
        gy = b.window(n.name, grad=True)
        run, _ = library.gemm_launcher(gy, b.window(r.node, r.delay), b.PG[n.params[0]], trans_a=True, beta=1.0,
                                       stream=self.stream, precision=self.precision)
        if len(n.params) < 2 or n.name in self._summed_by_twin:
            return run
        gb = b.PG[n.params[1]]
        twin = b.PG[self.g.by_name[self.twins[n.name]].params[1]] if n.name in self.twins else None
        return lambda: (run(), library.column_sum(gy, gb, accumulate=True, stream=self.stream, twin=twin))

    def column_sum(self, n) -> None:
        """A parameter's gradient summed over the window's columns of ``n``'s gradient (a ``reduce``
        kernel of a ``param`` node)."""
        library.column_sum(self.buf.window(n.name, grad=True), self.buf.PG[n.params[0]], accumulate=True,
                           stream=self.stream)

    def embedding(self, n, backward: bool, t: int | None = None) -> None:
        """An embedding node's gather (forward) or scatter-add into its table's gradient (backward)."""
        b, view = self.buf, self.views(t)
        ids = self.ids(n.args[0].node, t)
        if backward:
            library.embedding_backward(ids, view(n.name, grad=True), b.PG[n.params[0]], stream=self.stream)
        else:
            library.embedding_forward(ids, b.P[n.params[0]], view(n.name), stream=self.stream)

    def loss(self, n, backward: bool, t: int | None = None) -> None:
        """A loss node over the window (t None) or at timestep t: the launchers its registry
        entry names in ``cuda_loss`` (codegen/losses.py), or its ``loss_overrides`` entry, on
        views of its arguments, parameters and (backward) their gradients."""
        op, view = ops.REGISTRY[n.op], self.views(t)
        if n.name in self.loss_overrides:
            fwd, bwd = self.loss_overrides[n.name]
        elif op.cuda_loss is None:
            raise NotImplementedError(f"node {n.name!r}: loss op {n.op!r} has no GPU launchers (cuda_loss)")
        else:
            fwd, bwd = (getattr(losses, name) for name in op.cuda_loss)
        args = [self.ids(r.node, t) if self.g.by_name[r.node].dtype == INDEX else view(r.node, delay=r.delay)
                for r in n.args]
        call = losses.LossCall(args, [self.buf.P[p] for p in n.params], view(n.name).reshape(-1), n.attr,
                               self.stream)
        if backward:
            gargs = [view(r.node, grad=True, delay=r.delay) if self.g.differentiable(r.node) else None
                     for r in n.args]
            bwd(replace(call, gloss=view(n.name, grad=True).reshape(-1), gargs=gargs,
                        gparams=[self.buf.PG[p] for p in n.params]))
        else:
            fwd(call)

    def row_reduction(self, name: str, backward: bool, t: int | None):
        """The factory of a row reduction's launcher over the window (t None) or at timestep t:
        its registry entry's library kernels (codegen/row_reductions.py)."""
        n = self.g.by_name[name]
        r, code = n.args[0], row_code(n.op)

        def make():
            b = self.buf
            params = [b.P[p] for p in n.params]

            def run(t=t):
                view = self.views(t)
                if backward:
                    code.library_backward(view(r.node, delay=r.delay), params, view(name, grad=True),
                                          view(r.node, grad=True, delay=r.delay), [b.PG[p] for p in n.params],
                                          self.stream)
                else:
                    code.library_forward(view(r.node, delay=r.delay), params, view(name), self.stream)
            return run

        return make
