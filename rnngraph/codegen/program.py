"""A Schedule compiled for the GPU: generated kernels, device buffers, and the launch plan.

Every step of the schedule becomes a list of launches, built once: fused pointwise kernels and
persistent loop kernels are generated (rnngraph.codegen.pointwise / loop) into one module;
GEMMs, layer norm, the losses (codegen/losses.py), embedding gather/scatter, optimizers and clipping come
from rnngraph.codegen.library (cuBLAS where CuPy is present: codegen/cublas.py). Loops the
persistent emitter cannot take, or that the schedule marks graph mode (a layer norm inside the recurrence above
S=64 by default; the schedule's ``options.persistent_layer_norms`` decides), run per timestep;
phases and such loops are captured once into CUDA graphs and replayed (rnngraph.codegen.graphs).

Buffers (float32): ``V[node]`` and ``G[node]`` of shape (D + T, S, n), rows 0..D-1 holding the
state history (so a read at t - d is row D + t - d); token ids (T, S) int32; params and their
gradients in their declared shapes.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import replace

import numpy as np
from numba import cuda

from .. import ops
from ..ir import INDEX, Graph
from ..ops import is_row_reduction
from ..schedule import Kernel, Loop, Phase, Schedule, gradient_inputs
from . import library, losses, module
from .device import in_simulator
from .graphs import Replay
from .loop import SIM_THREADS, emit_loop_kernel, persistent_supported
from .loop_plan import LoopKernelPlan, plan_loop_kernel
from .pointwise import PRELUDE, Names, PointwiseEmitter, phase_kernel, step_kernel
from .row_reductions import row_code
from .tuning import LoopTuning

THREADS = 256
SIM_BLOCKS = 1  # simulator only: "blocks" a persistent loop kernel's one block is split into (tests set 2)


def _blocks(n: int, threads: int) -> int:
    return max(1, (n + threads - 1) // threads)


def _arena(views: dict, shapes: dict, stream):
    """One float32 device allocation holding every array of ``shapes``; fills ``views`` with
    reshaped slices of it and returns the flat arena."""
    sizes = {k: int(np.prod(v)) for k, v in shapes.items()}
    arena = cuda.device_array(max(1, sum(sizes.values())), np.float32, stream=stream)
    off = 0
    for k, shape in shapes.items():
        views[k] = arena[off:off + sizes[k]].reshape(shape)
        off += sizes[k]
    return arena


@cuda.jit
def _transpose(src, dst):
    i, j = cuda.grid(2)
    if i < src.shape[0] and j < src.shape[1]:
        dst[j, i] = src[i, j]


class Buffers:
    """Device arrays of one compiled schedule (see the module docstring). ``params`` (name ->
    float32 device array of the parameter's shape) makes several programs share one set of
    parameters (programs for other (T, S), rnngraph/layer.py); by default each allocates its own."""

    def __init__(self, g: Graph, T: int, S: int, stream, params: dict | None = None):
        self.g, self.T, self.S, self.names = g, T, S, Names(g)
        self.V, self.G, self.P, self.PG, self.PT = {}, {}, {}, {}, {}
        floats = [n for n in g.nodes if n.dtype != INDEX]
        shapes = {n.name: (self.names.depth(n.name) + T, S, n.size) for n in floats}
        for n in g.nodes:
            if n.dtype == INDEX:
                self.V[n.name] = cuda.device_array((T, S), np.int32, stream=stream)
            else:
                self.V[n.name] = cuda.device_array(shapes[n.name], np.float32, stream=stream)
        # gradients live in one arena (and parameter gradients in another), zeroed by one launch each
        self.grad_arena = _arena(self.G, shapes, stream)
        self.param_grad_arena = _arena(self.PG, {p.name: p.shape for p in g.params}, stream)
        for p in g.params:
            self.P[p.name] = cuda.device_array(p.shape, np.float32, stream=stream) if params is None else params[p.name]
        self.stream = stream
        self.LN: dict[str, tuple] = {}  # layer norm in a persistent loop -> (forward, backward) row sums

    def ln_sums(self, node: str) -> tuple:
        """The (T, S, 2) row-sum buffers of a layer norm inside a persistent loop (forward sums,
        backward sums; zeroed by the loop kernels themselves), allocated on first use."""
        if node not in self.LN:
            self.LN[node] = tuple(cuda.device_array((self.T, self.S, 2), np.float32, stream=self.stream)
                                  for _ in range(2))
        return self.LN[node]

    def add_transposed(self, param: str, stream) -> None:
        """Keep a transposed copy ``PT[param]`` (refresh it with :meth:`refresh_transposed`)."""
        if param not in self.PT:
            rows, cols = self.P[param].shape
            self.PT[param] = cuda.device_array((cols, rows), np.float32, stream=stream)

    def refresh_transposed(self, stream) -> None:
        """Copy every weight into its transposed buffer (after each update of the weights)."""
        for name, dst in self.PT.items():
            src = self.P[name]
            _transpose[(_blocks(src.shape[0], 16), _blocks(src.shape[1], 16)), (16, 16), stream](src, dst)

    def lookup(self, name: str):
        """The array behind a generated-code buffer name (V<k>, G<k>, P<k>; T<k> a transposed
        weight, Q<k> a parameter gradient, N<k>/M<k> a layer norm's forward/backward row sums)."""
        kind, k = name[0], int(name[1:])
        if kind == "P":
            return self.P[self.g.params[k].name]
        if kind == "T":
            return self.PT[self.g.params[k].name]
        if kind == "Q":
            return self.PG[self.g.params[k].name]
        if kind in "NM":
            return self.ln_sums(self.g.nodes[k].name)[kind == "M"]
        node = self.g.nodes[k].name
        return self.V[node] if kind == "V" else self.G[node]

    def window(self, node: str, delay: int = 0, grad: bool = False):
        """(T*S, n) view of a node over the window, read with ``delay``."""
        buf = (self.G if grad else self.V)[node]
        D = self.names.depth(node)
        return buf[D - delay:D - delay + self.T].reshape(self.T * self.S, buf.shape[2])

    def at(self, node: str, t: int, delay: int = 0, grad: bool = False):
        """(S, n) view of a node at timestep t - delay."""
        buf = (self.G if grad else self.V)[node]
        return buf[self.names.depth(node) + t - delay]


def every_value_written(schedule: Schedule) -> Schedule:
    """``schedule`` with every forward pointwise and reduction kernel writing all the nodes it
    computes to their ``V`` buffers (the generated code keeps the others in registers): what
    ``TrainingStep.forward(all_values=True)`` runs. The extra stores are read by no kernel, so
    the syncs and levels of the schedule stay valid; the backward is unchanged."""
    def widen(k: Kernel) -> Kernel:
        if k.kind not in ("pointwise", "reduction"):
            return k
        return replace(k, writes=tuple(dict.fromkeys(k.writes + k.ops)))
    forward = tuple(replace(step, kernels=tuple(widen(k) for k in step.kernels)) for step in schedule.forward)
    return replace(schedule, forward=forward)


class CudaProgram:
    """The launch plan of ``schedule`` on the current CUDA device (or the simulator).

    stream: the numba stream every launch goes to (default: a new one); replay: capture steps
    into CUDA graphs; params: shared parameter arrays (see :class:`Buffers`); backward=False
    generates and compiles no backward kernel (inference: :meth:`run_backward` then raises);
    buffers: another program's :class:`Buffers` (of a schedule of the same graph, T and S) to run
    on, with its inputs, states and parameters (``params`` is then ignored); tuning: the
    persistent loop kernels' code shape (codegen/tuning.py; None: ``LoopTuning.defaults(S)``).
    TypeError for a tuning that is not a LoopTuning."""

    def __init__(self, schedule: Schedule, stream=None, replay: bool = True, params: dict | None = None,
                 backward: bool = True, buffers: Buffers | None = None, tuning: LoopTuning | None = None):
        if tuning is not None and not isinstance(tuning, LoopTuning):
            raise TypeError(f"tuning must be an rg.LoopTuning, got {type(tuning).__name__}")
        self.s, self.g = schedule, schedule.graph
        self.replay, self.has_backward = replay, backward
        self.T, self.S = schedule.window, schedule.streams
        self.tuning = tuning or LoopTuning.defaults(self.S)
        self.stream = stream or cuda.stream()
        self.sim = in_simulator()
        self.buf = buffers if buffers is not None else Buffers(self.g, self.T, self.S, self.stream, params)
        self.sources: list[str] = [PRELUDE]
        self.loop_threads: dict[str, int] = {}  # persistent kernel -> threads per block it launches with
        self.loop_plans: dict[str, LoopKernelPlan] = {}  # persistent kernel -> its plan (codegen/loop_plan.py)
        self.segment_of = self._forward_segments()
        # node -> ops of the whole forward kernel computing it: what a persistent backward kernel
        # recomputes (layer norms included: their statistics come from the forward's row sums)
        self.kernel_of = {m: k.ops for k in schedule.kernels("forward") for m in k.ops}
        self.forward_plan = [self._step(st, backward=False) for st in schedule.forward]
        self.backward_plan = [self._step(st, backward=True) for st in schedule.backward] if backward else []
        self.source = "\n\n".join(self.sources)
        self.module = module.load(self.source)
        self.forward_plan = [self._replayable(st, [make() for make in step], "forward")
                             for st, step in zip(schedule.forward, self.forward_plan)]
        self.backward_plan = [self._replayable(st, [make() for make in step], "backward")
                              for st, step in zip(schedule.backward, self.backward_plan)]

    def _replayable(self, step, launches: list, direction: str) -> list:
        """A step's launches, replayed from a captured CUDA graph: phases, per-timestep loops and
        persistent loops too (one cooperative launch, but numba prepares its dozens of array
        arguments on every call; a graph replay launches the prepared kernel)."""
        if self.sim or self.replay is False:
            return launches

        def run():
            for launch in launches:
                launch()
        return [Replay(run, self.stream, f"{direction} {step.name}")]

    @property
    def replay_errors(self) -> list[str]:
        """Steps whose capture failed (they launch directly), with the reason."""
        return [f"{r.name}: {r.error}" for plan in (self.forward_plan, self.backward_plan)
                for step in plan for r in step if isinstance(r, Replay) and r.error]

    # ------------------------------------------------------------------ running
    def run_forward(self) -> None:
        """Launch every forward step (inputs, params and state histories must be in place)."""
        for step in self.forward_plan:
            for launch in step:
                launch()

    def run_backward(self) -> None:
        """Launch every backward step (gradient buffers must be zeroed and seeded)."""
        if not self.has_backward:
            raise RuntimeError("this program was compiled without its backward (backward=False)")
        for step in self.backward_plan:
            for launch in step:
                launch()

    # ------------------------------------------------------------------ building
    def _step(self, step, backward: bool) -> list:
        if isinstance(step, Phase):
            out = []
            for k in step.kernels:
                out += self._phase_kernel(k, backward)
            return out
        if step.mode == "persistent" and persistent_supported(step):
            return [self._persistent(step)]
        if step.post_sums:  # the per-timestep layer-norm kernels add their gain and bias gradients themselves
            raise NotImplementedError(f"{step.name}: its layer norms' gain and bias gradients are left to the "
                                      f"phase after it (post_sums {', '.join(step.post_sums)}), which only the "
                                      f"persistent kernel supports; this loop runs per timestep")
        return self._graph_mode(step, backward)

    def _fn(self, kind: str, k: Kernel) -> str:
        return f"{k.name}_{kind}"

    def _pointwise(self, k: Kernel, ops, backward: bool, per_step: bool):
        """Emit a pointwise kernel over ``ops``; returns a factory of its launcher(t=None)."""
        writes = gradient_inputs(k) if backward else k.writes
        # a name stable across processes (str hashes are salted per process; the module's file
        # and cached kernels are keyed by the source text)
        sub = f"{k.name}_{zlib.crc32(chr(0).join(ops).encode()) % 10**6}"
        recompute = self.segment_of[ops[0]] if backward else None
        e = PointwiseEmitter(self.g, sub, ops, [w for w in writes if w in ops] + self._escaping(ops, k, backward),
                             recompute)
        dev = e.backward() if backward else e.forward()
        args = sorted(e.buffers, key=lambda n: (n[0], int(n[1:])))
        fn = f"{sub}_{'step' if per_step else 'phase'}"
        wrapper = (step_kernel if per_step else phase_kernel)(fn, f"{sub}_{'bwd' if backward else 'fwd'}", args, e.u)
        self.sources += [dev, wrapper]
        n = (self.S if per_step else self.T * self.S) * e.u

        def make():
            kern = getattr(self.module, fn)
            arrays = [self.buf.lookup(a) for a in args]
            grid, block = _blocks(n, THREADS), min(THREADS, n)
            if per_step:
                return lambda t: kern[grid, block, self.stream](t, self.S, *arrays)
            return lambda: kern[grid, block, self.stream](self.T, self.S, *arrays)

        return make

    def _forward_segments(self) -> dict[str, tuple]:
        """Node -> the forward pointwise segment computing it (a kernel's ops split at layer norms)."""
        out = {}
        for k in self.s.kernels("forward"):
            if k.kind in ("pointwise", "reduction"):
                for kind, ops in self._segments(k):
                    for m in ops:
                        out[m] = ops
        return out

    def _escaping(self, ops, k: Kernel, backward: bool) -> list[str]:
        """Nodes of ``ops`` that other parts of the same kernel need (when a kernel is split at a layer norm)."""
        inside = set(ops)
        rest = set(k.ops) - inside
        out = []
        for m in ops:
            consumers = [c for c, _ in self.g.consumers()[m] if c.name in rest]
            if consumers or (backward and any(r.node in rest for r in self.g.by_name[m].args)):
                out.append(m)
        if backward:  # gradients flowing from the other parts into these ops arrive through G buffers
            out += [m for m in ops if any(c.name in rest for c, _ in self.g.consumers()[m])]
        return list(dict.fromkeys(out))

    def _segments(self, k: Kernel) -> list[tuple]:
        """Split a kernel's ops at row reductions (layer norms): [("pointwise", ops), ("row", (node,)), ...]."""
        segs, cur = [], []
        for m in k.ops:
            if is_row_reduction(self.g.by_name[m].op):
                if cur:
                    segs.append(("pointwise", tuple(cur)))
                    cur = []
                segs.append(("row", (m,)))
            else:
                cur.append(m)
        if cur:
            segs.append(("pointwise", tuple(cur)))
        return segs

    def _phase_kernel(self, k: Kernel, backward: bool) -> list:
        b, g = self.buf, self.g
        nodes = [g.by_name[m] for m in k.ops]
        if k.kind in ("pointwise", "reduction"):
            segs = self._segments(k)
            if backward:
                segs = segs[::-1]
            makes = []
            for kind, ops in segs:
                if kind == "pointwise":
                    makes.append(self._pointwise(k, ops, backward, per_step=False))
                else:
                    makes.append(self._row_reduction(ops[0], backward, None))
            return makes
        if k.kind == "gemm":
            return [lambda n=n: self._gemm_window_launcher(n, backward) for n in nodes]
        if k.kind == "wgrad":
            return [lambda n=n: self._wgrad_launcher(n) for n in nodes]
        if k.kind in ("gather", "scatter"):
            n = nodes[0]
            return [lambda n=n: (lambda: self._embedding(n, backward))]
        if k.kind == "loss":
            n = nodes[0]
            return [lambda n=n: (lambda: self._loss(n, backward))]
        if k.kind == "reduce" and is_row_reduction(nodes[0].op):  # a loop's post_sums layer norm
            return [self._row_param_sums(k)]
        if k.kind == "reduce":
            n = nodes[0]
            return [lambda n=n: (lambda: library.column_sum(b.window(n.name, grad=True), b.PG[n.params[0]],
                                                           accumulate=True, stream=self.stream))]
        raise NotImplementedError(f"kernel {k.name}: kind {k.kind!r} has no GPU emitter")

    def _row_param_sums(self, k: Kernel):
        """A row reduction's parameter gradients over the window, after its backward loop (a
        layer norm's gain and bias: codegen/ln_param_grads.py); returns the factory of its launcher."""
        node = k.ops[0]
        code = row_code(self.g.by_name[node].op)
        fn = f"{k.name}_ln_param_sums"
        src, args = code.param_grad_kernel(self.g, node, fn)
        self.sources.append(src)
        grid, threads, per_chunk = code.param_grad_grid(self.g.by_name[node].size, self.T * self.S)

        def make():
            kern, arrays = getattr(self.module, fn), [self.buf.lookup(a) for a in args]
            return lambda: kern[grid, threads, self.stream](self.T, self.S, np.int32(per_chunk), *arrays)
        return make

    # ------------------------------------------------------------------ library-backed kernels
    def _views(self, t: int | None):
        """view(node, grad=False, delay=0): the (T*S, n) window (t None) or the (S, n) timestep t."""
        b = self.buf
        if t is None:
            return lambda node, grad=False, delay=0: b.window(node, delay, grad)
        return lambda node, grad=False, delay=0: b.at(node, t, delay, grad)

    def _ids(self, node: str, t: int | None):
        """Token ids of an index input: (T*S,) over the window or (S,) at timestep t."""
        v = self.buf.V[node]
        return v.reshape(self.T * self.S) if t is None else v[t]

    def _gemm_window(self, n, backward: bool, t: int | None = None) -> None:
        """A linear node at timestep t, inside a per-timestep loop (captured into a CUDA graph)."""
        self._gemm_window_launcher(n, backward, t)()

    def _gemm_window_launcher(self, n, backward: bool, t: int | None = None):
        """A linear node over the whole window (t None) or at timestep t (a per-timestep loop,
        captured into a CUDA graph: codegen/cublas.py calls cuBLAS so that it can be), its views
        and GEMM arguments prepared once (buffers never move): returns the function that launches
        it (cuBLAS where CuPy is present, else the numba GEMM)."""
        b, r, view = self.buf, n.args[0], self._views(t)
        W = b.P[n.params[0]]
        if backward:
            run, _ = library.gemm_launcher(view(n.name, grad=True), W, view(r.node, grad=True, delay=r.delay),
                                           beta=1.0, stream=self.stream)
            return run
        out = view(n.name)
        run, _ = library.gemm_launcher(view(r.node, delay=r.delay), W, out, trans_b=True, stream=self.stream)
        if len(n.params) < 2:
            return run
        bias = b.P[n.params[1]]
        return lambda: (run(), library.add_bias(out, bias, stream=self.stream))

    def _wgrad_launcher(self, n):
        """A weight-gradient GEMM (and bias column sum) over the window, prepared once."""
        b, r = self.buf, n.args[0]
        gy = b.window(n.name, grad=True)
        run, _ = library.gemm_launcher(gy, b.window(r.node, r.delay), b.PG[n.params[0]], trans_a=True, beta=1.0,
                                       stream=self.stream)
        if len(n.params) < 2:
            return run
        gb = b.PG[n.params[1]]
        return lambda: (run(), library.column_sum(gy, gb, accumulate=True, stream=self.stream))

    def _embedding(self, n, backward: bool, t: int | None = None) -> None:
        b, view = self.buf, self._views(t)
        ids = self._ids(n.args[0].node, t)
        if backward:
            library.embedding_backward(ids, view(n.name, grad=True), b.PG[n.params[0]], stream=self.stream)
        else:
            library.embedding_forward(ids, b.P[n.params[0]], view(n.name), stream=self.stream)

    def _loss(self, n, backward: bool, t: int | None = None) -> None:
        """A loss node over the window (t None) or at timestep t: the launchers its registry
        entry names in ``cuda_loss`` (codegen/losses.py), on views of its arguments."""
        op, view = ops.REGISTRY[n.op], self._views(t)
        if op.cuda_loss is None:
            raise NotImplementedError(f"node {n.name!r}: loss op {n.op!r} has no GPU launchers (cuda_loss)")
        fwd, bwd = (getattr(losses, name) for name in op.cuda_loss)
        args = [self._ids(r.node, t) if self.g.by_name[r.node].dtype == INDEX else view(r.node, delay=r.delay)
                for r in n.args]
        if backward:
            gargs = [view(r.node, grad=True, delay=r.delay) if self.g.differentiable(r.node) else None
                     for r in n.args]
            bwd(args, view(n.name, grad=True).reshape(-1), gargs, n.attr, self.stream)
        else:
            fwd(args, view(n.name).reshape(-1), n.attr, self.stream)

    def _row_reduction(self, name: str, backward: bool, t: int | None):
        """The factory of a row reduction's launcher over the window (t None) or at timestep t:
        its registry entry's library kernels (codegen/row_reductions.py)."""
        n = self.g.by_name[name]
        r, code = n.args[0], row_code(n.op)

        def make():
            b = self.buf
            params = [b.P[p] for p in n.params]

            def run(t=t):
                view = self._views(t)
                if backward:
                    code.library_backward(view(r.node, delay=r.delay), params, view(name, grad=True),
                                          view(r.node, grad=True, delay=r.delay), [b.PG[p] for p in n.params],
                                          self.stream)
                else:
                    code.library_forward(view(r.node, delay=r.delay), params, view(name), self.stream)
            return run

        return make

    # ------------------------------------------------------------------ loops
    def _persistent(self, loop: Loop):
        name = f"{loop.name.split(' ')[0]}_{'bwd' if loop.reverse else 'fwd'}_{len(self.sources)}"
        tuning = self.tuning
        nblocks = 1 if self.sim else cuda.get_current_device().MULTIPROCESSOR_COUNT
        virtual = SIM_BLOCKS if self.sim and SIM_BLOCKS > 1 else 0
        plan = plan_loop_kernel(self.g, loop, name, coop=not self.sim, recompute=self.kernel_of, streams=self.S,
                                nblocks=nblocks, tuning=tuning, virtual_blocks=virtual)
        src, _ = emit_loop_kernel(self.g, plan, self.kernel_of)
        self.sources.append(src)
        self.loop_plans[name] = plan
        for p in plan.transposed:
            self.buf.add_transposed(p, self.stream)

        # the inline grid barrier's counter (codegen/grid_barrier.py) and the flag words of the
        # values the kernel hands between blocks (codegen/flag_exchange.py, zeroed by the kernel
        # itself at its start), one set per loop kernel
        zeroed = {a: cuda.to_device(np.zeros(shape, dtype), stream=self.stream)
                  for a, (shape, dtype) in plan.zeroed(lambda x: self.buf.lookup(x).shape).items()}

        def make():
            kern = getattr(self.module, name)
            arrays = [zeroed[a] if a in zeroed else self.buf.lookup(a) for a in plan.args[2:]]
            threads = SIM_THREADS * max(1, virtual) if self.sim else tuning.threads
            # one block per multiprocessor must be co-resident: halve the block until its registers fit
            while not self.sim and self._cooperative_blocks(kern, threads, arrays) < nblocks:
                if threads <= 64:
                    raise RuntimeError(f"{name}: a cooperative grid of {nblocks} blocks (one per multiprocessor) "
                                       f"does not fit even with {threads} threads a block")
                threads //= 2
            self.loop_threads[name] = threads
            return lambda: kern[nblocks, threads, self.stream](self.T, self.S, *arrays)

        return make

    def _cooperative_blocks(self, kern, threads: int, arrays) -> int:
        """As many blocks as can be co-resident (a cooperative launch needs all of them at once),
        from numba's ``max_cooperative_grid_blocks`` of the compiled kernel."""
        argtypes = tuple(kern.typeof_pyval(a) for a in [self.T, self.S, *arrays])
        compiled = kern.compile(argtypes)
        return max(1, compiled.max_cooperative_grid_blocks(threads))

    def _graph_mode(self, loop: Loop, backward: bool) -> list:
        """Per-timestep launches of every kernel in tick / level / stage order."""
        per_kernel = {}
        for k in loop.kernels:
            if k.kind == "gemm":
                per_kernel[k.name] = [lambda n=self.g.by_name[m]: (lambda t, n=n: self._gemm_window(n, backward, t))
                                      for m in k.ops]
            elif k.kind in ("gather", "scatter", "loss"):
                run = self._loss if k.kind == "loss" else self._embedding
                per_kernel[k.name] = [lambda n=self.g.by_name[k.ops[0]], run=run:
                                      (lambda t, n=n, run=run: run(n, backward, t))]
            else:
                makes = []
                segs = self._segments(k)
                for kind, ops in (segs[::-1] if backward else segs):
                    if kind == "pointwise":
                        makes.append(self._pointwise(k, ops, backward, per_step=True))
                    else:
                        makes.append(self._row_step(ops[0], backward))
                per_kernel[k.name] = makes
        top = max(o for o, _ in loop.stages)
        T = self.T

        def make():
            launches = {name: [m() for m in makes] for name, makes in per_kernel.items()}

            def run():
                for tick in range(T + top):
                    for level in range(1, loop.levels + 1):
                        for offset, _ in loop.stages:
                            t = tick - offset
                            if 0 <= t < T:
                                tt = T - 1 - t if loop.reverse else t
                                for k in loop.at(level, offset):
                                    for launch in launches[k.name]:
                                        launch(tt)
            return run

        return [make]

    def _row_step(self, name: str, backward: bool):
        def make():
            runs = {}

            def launch(t):
                if t not in runs:
                    runs[t] = self._row_reduction(name, backward, t)()
                runs[t]()
            return launch
        return make
