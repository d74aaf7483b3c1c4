"""The launches of a schedule's loops (codegen/program.py's ``CudaProgram``, whose mixin this is).

A loop the persistent emitter takes (and the schedule runs ``persistent``) becomes one persistent
cooperative kernel per window: planned (codegen/loop_plan.py), emitted (codegen/loop.py) into the
program's module, and launched with one block per multiprocessor (or LoopTuning ``blocks``, where
fewer), its block halved until the grid can be co-resident. Any other loop runs per timestep (graph mode): each of its kernels
launched in tick / level / stage order, pointwise segments as generated step kernels, GEMMs,
embeddings, losses and row reductions from the library (codegen/library_launches.py).

The mixin uses the program's ``g``, ``T``, ``S``, ``buf``, ``stream``, ``sim``, ``tuning``,
``virtual_blocks``, ``kernel_of``, ``lib``, ``sources``, ``loop_plans``, ``loop_threads``,
``loop_arguments`` and, once loaded, ``module``; graph mode also its pointwise generator (``_pointwise``, ``_segments``).
"""
from __future__ import annotations

import numpy as np
from numba import cuda

from ..schedule import Loop
from . import library
from .device import allow_dynamic_shared_memory
from .loop import SIM_THREADS, emit_loop_kernel
from .loop_plan import plan_loop_kernel
from .parallel_compile import precompile


class LoopLaunches:
    """Mixin of ``CudaProgram``: the launch factories of its persistent and per-timestep loops."""

    def _persistent(self, loop: Loop):
        """Plan and emit ``loop``'s persistent kernel into the program's sources; returns the
        factory of its launch (one cooperative grid of :meth:`loop_blocks` blocks)."""
        name = f"{loop.name.split(' ')[0]}_{'bwd' if loop.reverse else 'fwd'}_{len(self.sources)}"
        tuning = self.tuning if self.sim else self.device_tuning()
        nblocks = 1 if self.sim else self.loop_blocks(tuning)
        virtual = self.virtual_blocks
        plan = plan_loop_kernel(self.g, loop, name, coop=not self.sim, recompute=self.kernel_of, streams=self.S,
                                nblocks=nblocks, tuning=tuning, virtual_blocks=virtual, precision=self.lib.loop_precision)
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

        def arguments():
            return [zeroed[a] if a in zeroed else self.buf.lookup(a) for a in plan.args[2:]]
        self.loop_arguments[name] = arguments

        def make():
            kern = getattr(self.module, name)
            arrays = arguments()
            threads = SIM_THREADS * max(1, virtual) if self.sim else tuning.threads
            # the grid's blocks must be co-resident: halve the block until its registers fit
            dynamic = plan.dynamic_smem  # bytes a block (weight rows: codegen/loop_plan.py)
            while not self.sim and self._cooperative_blocks(kern, threads, arrays, dynamic) < nblocks:
                if threads <= 64:
                    raise RuntimeError(f"{name}: a cooperative grid of {nblocks} blocks (at most one a multiprocessor) "
                                       f"does not fit even with {threads} threads a block "
                                       f"and {dynamic} bytes of dynamic shared memory (LoopTuning.dsmem_kib)")
                threads //= 2
            self.loop_threads[name] = threads
            # the outputs whose padded steps the kernel skips hold zeros there (LoopKernelPlan ``unwritten``)
            unwritten = [self.buf.lookup(b)[first:first + self.T] for b, first in plan.unwritten]

            def launch():
                for a in unwritten:
                    library.fill(a, 0.0, stream=self.stream)
                kern[nblocks, threads, self.stream, dynamic](self.T, self.S, *arrays)
            return launch

        return make

    @staticmethod
    def loop_blocks(tuning) -> int:
        """The persistent loop kernels' grid: one block a multiprocessor of the current device, or
        ``tuning.blocks`` where that is fewer (LoopTuning ``blocks``)."""
        sms = cuda.get_current_device().MULTIPROCESSOR_COUNT
        return min(sms, tuning.blocks) if tuning.blocks else sms

    def device_tuning(self):
        """The program's tuning with ``dsmem_kib`` lowered to what a block of the current device may
        opt in to beside the static budget (``smem_kib``, and 1 KiB for numba's own arrays): on a
        GPU with less shared memory than the H200 (an A100: 163 KiB) the weight rows that do not
        fit are read from global memory instead of failing the launch."""
        t = self.tuning
        room = cuda.get_current_device().MAX_SHARED_MEMORY_PER_BLOCK_OPTIN // 1024 - t.smem_kib - 1
        return t if t.dsmem_kib <= room else t.replace(dsmem_kib=max(0, room))

    def _cooperative_blocks(self, kern, threads: int, arrays, dynamic: int = 0) -> int:
        """As many blocks as can be co-resident (a cooperative launch needs all of them at once),
        from numba's ``max_cooperative_grid_blocks`` of the compiled kernel with ``dynamic`` bytes
        of dynamic shared memory a block (allowed first)."""
        compiled = kern.compile(self._loop_argtypes(kern, arrays))
        allow_dynamic_shared_memory(compiled, dynamic)
        return max(1, compiled.max_cooperative_grid_blocks(threads, dynamic))

    def _loop_argtypes(self, kern, arrays) -> tuple:
        """numba's argument types of a persistent loop kernel's launch (T, S, then ``arrays``)."""
        return tuple(kern.typeof_pyval(a) for a in [self.T, self.S, *arrays])

    def _precompile_loops(self, workers: int | None) -> None:
        """The persistent loop kernels the disk cache lacks, compiled side by side in worker
        processes (codegen/parallel_compile.py) before the launches are made; for a program with a
        backward (one that trains), the training step's library kernels too."""
        jobs = []
        for name, arguments in self.loop_arguments.items():
            kern = getattr(self.module, name)
            jobs.append((kern, self._loop_argtypes(kern, arguments())))
        precompile(jobs, workers, library=bool(jobs) and self.has_backward)

    def _graph_mode(self, loop: Loop, backward: bool) -> list:
        """Per-timestep launches of every kernel in tick / level / stage order."""
        per_kernel = {}
        for k in loop.kernels:
            if k.kind == "gemm":
                per_kernel[k.name] = [lambda n=self.g.by_name[m]: (lambda t, n=n: self.lib.gemm(n, backward, t))
                                      for m in k.ops]
            elif k.kind in ("gather", "scatter", "loss"):
                run = self.lib.loss if k.kind == "loss" else self.lib.embedding
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
        """The factory of a row reduction's launch(t) at each timestep (its launcher made once a timestep)."""
        def make():
            runs = {}

            def launch(t):
                if t not in runs:
                    runs[t] = self.lib.row_reduction(name, backward, t)()
                runs[t]()
            return launch
        return make
