"""A Schedule compiled for the GPU: generated kernels, device buffers, and the launch plan.

Every step of the schedule becomes a list of launches, built once: fused pointwise kernels and
persistent loop kernels are generated (rnngraph.codegen.pointwise / loop) into one module;
GEMMs, layer norm, the losses (codegen/losses.py), embedding gather/scatter, optimizers and clipping come
from rnngraph.codegen.library (cuBLAS where CuPy is present: codegen/cublas.py). Loops the
persistent emitter cannot take, or that the schedule marks graph mode (a layer norm inside the recurrence above
S=64 by default; the schedule's ``options.persistent_layer_norms`` decides), run per timestep;
phases and such loops are captured once into CUDA graphs and replayed (rnngraph.codegen.graphs).

Here: the program (building, loading, replaying and running its steps) and the phases' kernels
(fused pointwise segments, split at row reductions; a row reduction's parameter-gradient sums after
its backward loop). Elsewhere: the device buffers (codegen/buffers.py: ``Buffers``, their layout),
the library kernels' launches (codegen/library_launches.py) and the loops' launches
(codegen/program_loops.py, a mixin of ``CudaProgram``).
"""
from __future__ import annotations

import zlib
from dataclasses import replace

import numpy as np
from numba import cuda

from ..ops import is_row_reduction
from ..passes.folded_biases import loop_folded
from ..passes.twin_biases import scheduled_twins, written_once
from ..schedule import Kernel, Loop, Phase, Schedule, gradient_inputs, loop_precision
from . import module
from .buffers import Buffers
from .device import blocks, in_simulator
from .graphs import Replay
from .library_launches import LibraryLaunches
from .loop import persistent_supported
from .loop_plan import LoopKernelPlan
from .pointwise import PRELUDE, PointwiseEmitter, phase_kernel, step_kernel
from .program_loops import LoopLaunches
from .row_reductions import row_code
from .tuning import LoopTuning

THREADS = 256
SIM_BLOCKS = 1  # simulator only: "blocks" a persistent loop kernel's one block is split into (tests set 2)


def every_value_written(schedule: Schedule) -> Schedule:
    """``schedule`` with every forward pointwise and reduction kernel writing all the nodes it
    computes to their ``V`` buffers (the generated code keeps the others in registers), and every
    product its own bias (no ``folded_biases``: passes/folded_biases.py): what
    ``TrainingStep.forward(all_values=True)`` runs. The extra stores are read by no kernel, so
    the syncs and levels of the schedule stay valid; the backward is unchanged."""
    def widen(k: Kernel) -> Kernel:
        if k.kind not in ("pointwise", "reduction"):
            return k
        return replace(k, writes=tuple(dict.fromkeys(k.writes + k.ops)))
    forward = tuple(replace(step, kernels=tuple(widen(k) for k in step.kernels),
                            **({"folded_biases": ()} if isinstance(step, Loop) else {})) for step in schedule.forward)
    options = schedule.options and schedule.options.replace(folded_biases=False)
    return replace(schedule, forward=forward, options=options)


class CudaProgram(LoopLaunches):
    """The launch plan of ``schedule`` on the current CUDA device (or the simulator).

    stream: the numba stream every launch goes to (default: a new one); replay: capture steps
    into CUDA graphs; params: shared parameter arrays (see :class:`Buffers`); backward=False
    generates and compiles no backward kernel (inference: :meth:`run_backward` then raises);
    buffers: another program's :class:`Buffers` (of a schedule of the same graph, T and S) to run
    on, with its inputs, states and parameters (``params`` is then ignored); tuning: the
    persistent loop kernels' code shape (codegen/tuning.py; None: ``LoopTuning.defaults(S)``);
    compile_workers: at most this many worker processes compile the persistent loop kernels the
    disk cache lacks side by side (codegen/parallel_compile.py; None: one a core; 1: none, each
    compiled here in turn). TypeError for a tuning that is not a LoopTuning; ValueError for
    ``buffers`` that leave out of their zeroing a gradient this schedule's backward adds into
    (Buffers ``unzeroed``, passes/twin_biases.py ``written_once``)."""

    def __init__(self, schedule: Schedule, stream=None, replay: bool = True, params: dict | None = None,
                 backward: bool = True, buffers: Buffers | None = None, tuning: LoopTuning | None = None,
                 compile_workers: int | None = None):
        if tuning is not None and not isinstance(tuning, LoopTuning):
            raise TypeError(f"tuning must be an rg.LoopTuning, got {type(tuning).__name__}")
        self.s, self.g = schedule, schedule.graph
        self.replay, self.has_backward = replay, backward
        self.T, self.S = schedule.window, schedule.streams
        self.tuning = tuning or LoopTuning.defaults(self.S)
        self.stream = stream or cuda.stream()
        self.sim = in_simulator()
        if buffers is not None:  # another program's: it may store values that one kept in registers
            buffers.ensure_values(schedule.value_nodes)
        # the gradients the backward writes whole without reading them are left out of the zeroing
        flagged = {f[2:] for lp in schedule.backward if isinstance(lp, Loop) for f in lp.flagged if f.startswith("d.")}
        unzeroed = written_once(self.g, flagged)
        if buffers is not None and backward and buffers.unzeroed - unzeroed:
            raise ValueError(f"buffers: the gradients of {', '.join(sorted(buffers.unzeroed - unzeroed))} are not "
                             f"zeroed by the program whose buffers these are, but this schedule's backward adds "
                             f"into them (flagged words): give it buffers of its own")
        self.buf = buffers if buffers is not None else Buffers(self.g, self.T, self.S, self.stream, params,
                                                               grad_nodes=schedule.gradient_nodes,
                                                               value_nodes=schedule.value_nodes,
                                                               unzeroed=unzeroed)
        self.lib = LibraryLaunches(self.buf, self.stream, schedule.precision, loop_precision(schedule),
                                   loop_folded(schedule.forward), scheduled_twins(self.g, schedule.backward))
        self.virtual_blocks = SIM_BLOCKS if self.sim and SIM_BLOCKS > 1 else 0  # LoopEmitter's virtual_blocks
        self.sources: list[str] = [PRELUDE]
        self.loop_threads: dict[str, int] = {}  # persistent kernel -> threads per block it launches with
        self.loop_plans: dict[str, LoopKernelPlan] = {}  # persistent kernel -> its plan (codegen/loop_plan.py)
        self.loop_arguments: dict = {}  # persistent kernel -> its launch arrays (a function: made when asked)
        self.segment_of = self._forward_segments()
        # node -> ops of the whole forward kernel computing it: what a persistent backward kernel
        # recomputes (layer norms included: their statistics come from the forward's row sums)
        self.kernel_of = {m: k.ops for k in schedule.kernels("forward") for m in k.ops}
        self.forward_plan = [self._step(st, backward=False) for st in schedule.forward]
        self.backward_plan = [self._step(st, backward=True) for st in schedule.backward] if backward else []
        self.source = "\n\n".join(self.sources)
        self.module = module.load(self.source)
        if not self.sim and compile_workers != 1:
            self._precompile_loops(compile_workers)
        # each step's launches, and the same wrapped for replay from a CUDA graph of the step
        self.forward_launches = [[make() for make in step] for step in self.forward_plan]
        self.backward_launches = [[make() for make in step] for step in self.backward_plan]
        self.forward_plan = [self._replayable(st, launches, "forward")
                             for st, launches in zip(schedule.forward, self.forward_launches)]
        self.backward_plan = [self._replayable(st, launches, "backward")
                              for st, launches in zip(schedule.backward, self.backward_launches)]

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
    def run_forward(self, direct: bool = False) -> None:
        """Launch every forward step (inputs, params and state histories must be in place); each
        step replays its own CUDA graph, or with ``direct`` launches its kernels (what a caller
        capturing a larger graph wants: codegen/step.py's training step)."""
        for step in self.forward_launches if direct else self.forward_plan:
            for launch in step:
                launch()

    def run_backward(self, direct: bool = False) -> None:
        """Launch every backward step (gradient buffers must be zeroed and seeded); ``direct`` as
        for :meth:`run_forward`."""
        if not self.has_backward:
            raise RuntimeError("this program was compiled without its backward (backward=False)")
        for step in self.backward_launches if direct else self.backward_plan:
            for launch in step:
                launch()

    # ------------------------------------------------------------------ building
    def _step(self, step, backward: bool) -> list:
        """The launch factories of one step: a phase's kernels, or a loop (persistent or per timestep)."""
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
            grid, block = blocks(n, THREADS), min(THREADS, n)
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
        """The launch factories of one kernel of a phase, forward or backward."""
        nodes = [self.g.by_name[m] for m in k.ops]
        if k.kind in ("pointwise", "reduction"):
            segs = self._segments(k)
            if backward:
                segs = segs[::-1]
            makes = []
            for kind, ops in segs:
                if kind == "pointwise":
                    makes.append(self._pointwise(k, ops, backward, per_step=False))
                else:
                    makes.append(self.lib.row_reduction(ops[0], backward, None))
            return makes
        if k.kind == "gemm":
            return [lambda n=n: self.lib.gemm_launcher(n, backward) for n in nodes]
        if k.kind == "wgrad":
            return [lambda n=n: self.lib.wgrad_launcher(n) for n in nodes]
        if k.kind in ("gather", "scatter"):
            n = nodes[0]
            return [lambda n=n: (lambda: self.lib.embedding(n, backward))]
        if k.kind == "loss":
            n = nodes[0]
            return [lambda n=n: (lambda: self.lib.loss(n, backward))]
        if k.kind == "reduce" and is_row_reduction(nodes[0].op):  # a loop's post_sums layer norm
            return [self._row_param_sums(k)]
        if k.kind == "reduce":
            n = nodes[0]
            return [lambda n=n: (lambda: self.lib.column_sum(n))]
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
