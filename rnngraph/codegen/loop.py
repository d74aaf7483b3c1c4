"""Emit one persistent cooperative kernel per loop of the schedule (forward or backward).

The kernel runs the whole window: for each tick, for each level, every stage whose timestep
t = tick - offset is inside the window runs its kernels, and the grid syncs at the end of the
level (``cuda.cg.this_grid().sync()``). Work is split by *ownership*: a level has a unit
u_L (the gcd of its kernels' units and GEMM sizes) and block b owns units
[b*u_L/B, (b+1)*u_L/B); it computes the GEMM rows of those units (one warp per row, lanes
striding over the inner dimension and reducing with warp shuffles; one thread per row in the
simulator, which has no shuffles), syncs its threads, then runs the fused pointwise code for
the same units. So a level costs one grid sync, as the schedule says: the values a block
reads within a level are its own. Recurrent weights are read from global memory, where they
stay resident in the 50 MB L2 across timesteps.

Backward: the same structure in reverse time; a GEMM's VJP adds W^T g into the gradient of its
input (``G[x] += ...``), each block for the input units it owns.
"""
from __future__ import annotations

import math

from ..ir import Graph
from ..schedule import Kernel, Loop
from .pointwise import Names, PointwiseEmitter, kernel_unit
from .tuning import LoopTuning

SUPPORTED = ("gemm", "pointwise")


def persistent_supported(loop: Loop) -> bool:
    """Whether every kernel of the loop is a GEMM or fused pointwise kernel (the persistent emitter's scope)."""
    return all(k.kind in SUPPORTED for k in loop.kernels)


class LoopEmitter:
    """Source of the persistent kernel ``{name}`` for ``loop`` (``loop.reverse`` = backward).

    Call :meth:`source` to get (device functions + kernel source, sorted buffer names).
    ``coop``: emit warp-cooperative GEMM rows with shuffles (GPU); False for the simulator.
    """

    def __init__(self, g: Graph, loop: Loop, name: str, coop: bool = True, recompute: dict | None = None,
                 streams: int = 1, nblocks: int = 1, tuning: LoopTuning | None = None):
        self.g, self.loop, self.name, self.coop = g, loop, name, coop
        self.nblocks = nblocks  # the grid the kernel must be launched with (sizes the shared arrays)
        self.tuning = tuning or LoopTuning()
        self.smem_left = self.tuning.smem_kib * 1024  # bytes of shared memory still free for weights
        self.prologue: list[str] = []  # kernel-start code: weight rows into shared memory
        self.smem: dict[tuple, str] = {}  # (weight, reps, unit, inner) -> its shared array
        self.stream_block = max(1, min(streams, 8))  # streams per GEMM work item (register blocking)
        self.transposed: set[str] = set()  # weights read transposed (backward)
        self.recompute = recompute or {}  # node -> ops of the forward kernel computing it
        self.names = Names(g)
        self.buffers: set[str] = set()
        self.device_fns: list[str] = []
        self.body: list[str] = []

    # ------------------------------------------------------------------ units
    def _gemm_sizes(self, k: Kernel) -> list[int]:
        nodes = [self.g.by_name[m] for m in k.ops]
        if self.loop.reverse:
            return [self.g.by_name[nodes[0].args[0].node].size]
        return [n.size for n in nodes]

    def level_unit(self, ks: list[Kernel]) -> int:
        vals = []
        for k in ks:
            vals += self._gemm_sizes(k) if k.kind == "gemm" else [kernel_unit(self.g, k.ops)]
        return math.gcd(*vals)

    # ------------------------------------------------------------------ emit helpers
    def emit(self, line: str, depth: int) -> None:
        self.body.append("    " * depth + line)

    def pointwise(self, k: Kernel, uL: int, depth: int) -> None:
        e = PointwiseEmitter(self.g, k.name, k.ops, gradient_inputs(k) if self.loop.reverse else k.writes,
                             self.recompute.get(k.ops[0]) if self.loop.reverse else None)
        src = e.backward() if self.loop.reverse else e.forward()
        self.device_fns.append(src)
        self.buffers |= e.buffers
        args = ", ".join(sorted(e.buffers, key=_key))
        reps = e.u // uL
        self.emit(f"# {k.name}: pointwise, {len(k.ops)} ops, unit {e.u}", depth)
        self.emit(f"item = tid", depth)
        self.emit(f"while item < S * nj * {reps}:", depth)
        self.emit(f"s = item // (nj * {reps})", depth + 1)
        self.emit(f"rem = item - s * (nj * {reps})", depth + 1)
        self.emit(f"jj = rem // {reps}", depth + 1)
        self.emit(f"j = j0 + jj + (rem - jj * {reps}) * {uL}", depth + 1)
        self.emit(f"{k.name}_{'bwd' if self.loop.reverse else 'fwd'}(t, s, j, {args})", depth + 1)
        self.emit("item += bdim", depth + 1)

    def gemm(self, k: Kernel, uL: int, depth: int) -> None:
        """One GEMM kernel's owned rows: forward y[r] = W[r,:] . x (+ b[r]); backward
        dx[c] += sum_m W_m[:,c] . g_m, reading the transposed weights ``T<k>`` (kept in sync by
        the runtime) so that lanes read consecutive addresses."""
        nodes = [self.g.by_name[m] for m in k.ops]
        ref = nodes[0].args[0]
        x = ref.node
        K = self.g.by_name[x].size
        xrow = f"{self.names.depth(x) - ref.delay} + t"
        if not self.loop.reverse:
            for n in nodes:
                w = self.names.param(n.params[0])
                b = self.names.param(n.params[1]) if len(n.params) == 2 else None
                out, X = self.names.value(n.name), self.names.value(x)
                self.buffers |= {w, out, X} | ({b} if b else set())
                self.emit(f"# {k.name}: {n.name} = {n.params[0]} @ {ref}{' + bias' if b else ''}", depth)
                reps = n.size // uL
                self._rows(depth, reps, uL, K, [(self._weight(w, reps, uL, K), f"{X}[{xrow}, {{s}}, {{k}}]")],
                           f"{out}[{self.names.depth(n.name)} + t, {{s}}, {{r}}] = {{acc}}" + (f" + {b}[{{r}}]" if b else ""))
        else:
            GX, terms = self.names.grad(x), []
            self.buffers.add(GX)
            R = nodes[0].size
            if any(n.size != R for n in nodes):
                raise NotImplementedError("merged GEMM members of different sizes in a backward loop")
            for n in nodes:
                wt = "T" + self.names.param(n.params[0])[1:]
                gy = self.names.grad(n.name)
                self.buffers |= {wt, gy}
                self.transposed.add(n.params[0])
                terms.append((self._weight(wt, K // uL, uL, R), f"{gy}[{self.names.depth(n.name)} + t, {{s}}, {{k}}]"))
            self.emit(f"# {k.name}: d.{ref} += sum W^T d.({', '.join(k.ops)})", depth)
            self._rows(depth, K // uL, uL, R, terms, f"{GX}[{xrow}, {{s}}, {{r}}] += {{acc}}")

    def _weight(self, w: str, reps: int, uL: int, inner: int) -> str:
        """The read of weight buffer ``w`` at (owned row {r}, column {k}): from a shared-memory copy of
        the block's rows when they fit in what is left of ``tuning.smem_kib``, else from global
        memory. The copy's row index is the row's place {rem} (= jj * reps + rep) among the block's, filled once at
        kernel start by the prologue."""
        key = (w, reps, uL, inner)
        if key in self.smem:
            return f"{self.smem[key]}[{{rem}}, {{k}}]"
        rows = -(-uL // self.nblocks) * reps
        if rows * inner * 4 > self.smem_left:
            return f"{w}[{{r}}, {{k}}]"
        self.smem_left -= rows * inner * 4
        sw = self.smem[key] = f"sw{len(self.smem)}"
        p = lambda line, d=0: self.prologue.append("    " * (1 + d) + line)
        p(f"# {w}: the block's {reps} x {-(-uL // self.nblocks)} owned rows into shared memory")
        p(f"{sw} = cuda.shared.array(({rows}, {inner}), float32)")
        p(f"j0 = (bid * {uL}) // nblocks")
        p(f"nj = ((bid + 1) * {uL}) // nblocks - j0")
        p("i = tid")
        p(f"while i < nj * {reps} * {inner}:")
        p(f"lr = i // {inner}", 1)
        p(f"kk = i - lr * {inner}", 1)
        p(f"jj = lr // {reps}", 1)
        p(f"{sw}[lr, kk] = {w}[j0 + jj + (lr - jj * {reps}) * {uL}, kk]", 1)
        p("i += bdim", 1)
        self.buffers.add(w)
        return f"{sw}[{{rem}}, {{k}}]"

    def _rows(self, depth: int, reps: int, uL: int, inner: int, terms, store: str) -> None:
        """Loop over the block's owned rows, RB rows x SB streams per work item (a warp on the GPU,
        a thread in the simulator), reducing sum_m W_m[r, kk] * v_m[s, kk] over kk < inner.
        ``terms`` are (weight read with {r}, {rem}, {k}; vector read with {s}, {k}) pairs and
        ``store`` the statement with {r}, {s} and {acc}. Register blocking: a weight element is
        loaded once for SB streams and a vector element once for RB rows; the kk loop is unrolled
        ``tuning.unroll`` times (independent loads in flight), with a remainder loop."""
        e = lambda line, d=0: self.emit(line, depth + d)
        SB, RB = self.stream_block, self.tuning.rows
        start, step, kstep = ("warp", "nwarps", 32) if self.coop else ("tid", "bdim", 1)
        e(f"nrows = nj * {reps}")
        e(f"ngroups = (nrows + {RB - 1}) // {RB}")
        e(f"item = {start}")
        e(f"while item < ((S + {SB - 1}) // {SB}) * ngroups:")
        e("sb = item // ngroups", 1)
        e(f"g0 = (item - sb * ngroups) * {RB}", 1)
        for a in range(RB):
            e(f"rem{a} = min(g0 + {a}, nrows - 1)", 1)
            e(f"jj = rem{a} // {reps}", 1)
            e(f"r{a} = j0 + jj + (rem{a} - jj * {reps}) * {uL}", 1)
        for i in range(SB):
            e(f"s{i} = min(sb * {SB} + {i}, S - 1)", 1)
            for a in range(RB):
                e(f"acc{a}_{i} = float32(0.0)", 1)
        e(f"kk = {'lane' if self.coop else '0'}", 1)
        U = max(1, min(self.tuning.unroll, inner // kstep))
        loops = [(U, f"kk + {(U - 1) * kstep} < {inner}")] + ([(1, f"kk < {inner}")] if U > 1 else [])
        for unroll, cond in loops:
            e(f"while {cond}:", 1)
            for u in range(unroll):
                k = f"kk + {u * kstep}" if u else "kk"
                for m, (w, vec) in enumerate(terms):
                    for a in range(RB):
                        e(f"w{m}_{a}_{u} = {w.format(r=f'r{a}', rem=f'rem{a}', k=k)}", 2)
                    for i in range(SB):
                        e(f"v = {vec.format(s=f's{i}', k=k)}", 2)
                        for a in range(RB):
                            e(f"acc{a}_{i} += w{m}_{a}_{u} * v", 2)
            e(f"kk += {unroll * kstep}", 2)
        accs = [(a, i) for a in range(RB) for i in range(SB)]
        if self.coop:
            for a, i in accs:
                e("off = 16", 1)
                e("while off > 0:", 1)
                e(f"acc{a}_{i} += cuda.shfl_down_sync(0xFFFFFFFF, acc{a}_{i}, off)", 2)
                e("off //= 2", 2)
        guard = "if lane == 0 and " if self.coop else "if "
        for a, i in accs:
            e(f"{guard}g0 + {a} < nrows and sb * {SB} + {i} < S:", 1)
            e(store.format(r=f"r{a}", s=f"s{i}", acc=f"acc{a}_{i}"), 2)
        e(f"item += {step}", 1)

    # ------------------------------------------------------------------ kernel
    def source(self) -> tuple[str, list[str]]:
        """(device functions + the persistent kernel, its buffer arguments in order)."""
        loop = self.loop
        top = max(o for o, _ in loop.stages)
        self.emit(f"for tick in range(T + {top}):", 1)
        for level in range(1, loop.levels + 1):
            ks_level = [k for k in loop.kernels if k.level == level]
            if not ks_level:
                continue
            uL = self.level_unit(ks_level)
            self.emit(f"# level {level}: unit {uL}", 2)
            self.emit(f"j0 = (bid * {uL}) // nblocks", 2)
            self.emit(f"nj = ((bid + 1) * {uL}) // nblocks - j0", 2)
            for offset, label in loop.stages:
                ks = loop.at(level, offset)
                if not ks:
                    continue
                tt = f"T - 1 - (tick - {offset})" if loop.reverse else f"tick - {offset}"
                self.emit(f"# stage {offset}: {label}", 2)
                self.emit(f"t = {tt}", 2)
                self.emit("if t >= 0 and t < T:", 2)
                for j, k in enumerate(ks):
                    if j:
                        self.emit("cuda.syncthreads()", 3)
                    (self.gemm if k.kind == "gemm" else self.pointwise)(k, uL, 3)
            self.emit("grid.sync()", 2)
        args = sorted(self.buffers, key=_key)
        head = [
            "@cuda.jit",
            f"def {self.name}(T, S, {', '.join(args)}):",
            "    grid = cuda.cg.this_grid()",
            "    tid = cuda.threadIdx.x",
            "    bdim = cuda.blockDim.x",
            "    bid = cuda.blockIdx.x",
            "    nblocks = cuda.gridDim.x",
        ]
        if self.coop:
            head += ["    lane = tid % 32", "    warp = tid // 32", "    nwarps = bdim // 32"]
        if self.prologue:
            head += self.prologue + ["    cuda.syncthreads()"]
        text = "\n\n".join(self.device_fns) + "\n\n" + "\n".join(head + self.body) + "\n"
        return text, args


def gradient_inputs(k: Kernel) -> list[str]:
    """The nodes whose gradient buffers a backward kernel reads (its forward kernel's writes)."""
    return [r[2:].split("[")[0] for r in k.reads if r.startswith("d.")]


def _key(name: str) -> tuple:
    """Sort key of a buffer name: kind letter, then index."""
    return (name[0], int(name[1:]))
