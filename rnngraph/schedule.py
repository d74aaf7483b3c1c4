"""The Schedule: the ordered plan of kernels for one training window, and its text dump.

A schedule has a forward and a backward list of steps. A :class:`Phase` runs its kernels once
per window over all T*S columns; a :class:`Loop` steps through time (backward: in reverse),
running each stage's kernels level by level, a stage ``offset`` timesteps behind the first
(the wavefront). ``print(schedule)`` gives the stable, deterministic text form; JSON, DOT and a
Gantt chart are in :mod:`rnngraph.schedule_export`.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

from .ir import INDEX, Graph
from .ops import chunk_bounds, chunking, is_row_reduction, lsh_text
from .schedule_options import LOOP_TENSOR_CORES_RULE, ScheduleOptions, loop_tensor_cores_by_default


@dataclass(frozen=True)
class Kernel:
    """One kernel: ``ops`` (node names in forward order; a backward kernel runs their VJPs in
    reverse) of ``kind`` (gemm, pointwise, reduction, gather, loss; backward also wgrad, scatter,
    reduce); ``reads``/``writes`` the values crossing its boundary (``name`` or ``name[t-d]``;
    ``d.name`` is a gradient); ``rows`` x ``cols`` its shape (elements per column x columns per
    launch; for wgrad the weight's shape); ``level``/``stage`` its place in a loop body; ``flops``
    per launch."""

    name: str
    kind: str
    ops: tuple[str, ...]
    op_names: tuple[str, ...]
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    params: tuple[str, ...]
    rows: int
    cols: int
    flops: int
    level: int = 0
    stage: int = 0


def gradient_inputs(k: Kernel) -> list[str]:
    """The nodes whose gradient buffers a backward kernel reads (its forward kernel's writes),
    from its ``d.name`` / ``d.name[t-d]`` reads."""
    return [r[2:].split("[")[0] for r in k.reads if r.startswith("d.")]


@dataclass(frozen=True)
class Phase:
    """Kernels run once per window, in order (``name``: prologue, between loops, epilogue, ...)."""

    name: str
    kernels: tuple[Kernel, ...]


@dataclass(frozen=True)
class Loop:
    """A loop over the window's timesteps (``reverse`` in backward).

    stages: (offset, label) pairs; kernels: all kernels of the body, each with its level and
    stage; levels: dependency levels per timestep = the initiation interval; mode:
    ``persistent`` (one cooperative kernel per window) or ``graph`` (per-timestep kernels
    replayed from a CUDA graph); ticks = window + largest offset; syncs: the levels whose end
    needs a grid sync (passes/grid_syncs.py; the others end with a block barrier, their
    successor touching only what its own block wrote), all of them in graph mode; None (a Loop
    not built by lower): every level (:attr:`sync_after`); early_sums: the layer norms of a
    persistent loop whose row sums the blocks add at the end of the level before theirs, over the
    elements of the input (forward) or output gradient (backward) they just wrote there
    (passes/row_sums.py), so that their level needs no reduction sync; post_sums (backward): the
    layer norms whose gain and bias gradients the loop leaves to ``reduce`` kernels of the phase
    after it (passes/param_grad_sums.py), the loop computing only their input gradients;
    flagged: the values its GEMMs read through flagged words (each element with its timestep
    tag, polled by the readers) instead of after a grid sync (passes/flag_exchange.py; ``syncs``
    are then those still needed); folded_biases (forward): (loop product, window product) pairs
    whose sum alone is read, the loop's GEMM store adding the window product's bias too, which
    then gets no bias kernel (passes/folded_biases.py).
    """

    name: str
    stages: tuple[tuple[int, str], ...]
    kernels: tuple[Kernel, ...]
    levels: int
    mode: str
    ticks: int
    reverse: bool = False
    syncs: tuple[int, ...] | None = None
    early_sums: tuple[str, ...] = ()
    post_sums: tuple[str, ...] = ()
    flagged: tuple[str, ...] = ()
    folded_biases: tuple[tuple[str, str], ...] = ()

    @property
    def sync_after(self) -> tuple[int, ...]:
        """The levels whose end has a grid sync: ``syncs``, every level when it is None."""
        return tuple(range(1, self.levels + 1)) if self.syncs is None else self.syncs

    @property
    def reduction_syncs(self) -> int:
        """Extra grid syncs per timestep of a persistent loop: one per level holding a layer norm
        whose row sums are added across blocks at the start of that level, before the
        normalisation (not those in ``early_sums``); 0 in graph mode."""
        if self.mode != "persistent":
            return 0
        return len({k.level for k in self.kernels for m, op in zip(k.ops, k.op_names)
                    if is_row_reduction(op) and m not in self.early_sums})

    def at(self, level: int, stage: int) -> list[Kernel]:
        """The kernels of one level of one stage, in order."""
        return [k for k in self.kernels if k.level == level and k.stage == stage]


@dataclass(frozen=True)
class Schedule:
    """The compiled plan of a graph for windows of ``window`` timesteps over ``streams`` streams,
    built with ``options`` (what the passes decided beyond the graph; None: not recorded, as in a
    Schedule not built by ``rnngraph.passes.schedule``); ``precision`` (rnngraph/precision.py): the
    operand format of its once-per-window GEMMs (:func:`gemm_precision` says each GEMM's)."""

    graph: Graph = field(repr=False)
    window: int
    streams: int
    dtype: str
    plan: str
    reason: str
    forward: tuple
    backward: tuple
    options: ScheduleOptions | None = None
    precision: str = "fp32"

    # ------------------------------------------------------------------ statistics
    def kernels(self, direction: str = "both") -> list[Kernel]:
        """Every kernel of ``forward``, ``backward`` or ``both``."""
        steps = {"forward": self.forward, "backward": self.backward, "both": self.forward + self.backward}[direction]
        return [k for s in steps for k in s.kernels]

    @property
    def work(self) -> int:
        """FLOPs of one window, forward and backward."""
        total = 0
        for s in self.forward + self.backward:
            runs = self.window if isinstance(s, Loop) else 1  # each stage runs every timestep once
            total += runs * sum(k.flops for k in s.kernels)
        return total

    @property
    def critical_path(self) -> int:
        """Levels on the longest chain of one window: dependent kernels in phases, ticks x levels in
        loops (a persistent loop's reduction syncs count as levels)."""
        return sum(_phase_depth(s) if isinstance(s, Phase) else s.ticks * (s.levels + s.reduction_syncs)
                   for s in self.forward + self.backward)

    @property
    def launches(self) -> int:
        """Kernel launches per window (a persistent loop is one launch; a graph-replayed one
        launches each kernel every timestep)."""
        total = 0
        for s in self.forward + self.backward:
            if isinstance(s, Phase):
                total += len(s.kernels)
            else:
                total += 1 if s.mode == "persistent" else s.ticks * len(s.kernels)
        return total

    def _in_memory_ops(self) -> set:
        """Ops whose values and gradients live in memory whatever the kernels' reads and writes
        list: those of the library kernels (gemm, gather, loss, scatter: an unused node's too) and
        of reduction kernels outside persistent loops (split at each layer norm into launches that
        hand values and gradients on through memory: codegen/program.py), and what callers feed,
        seed or read back (the outputs, the loss, the states' nodes)."""
        out = set(self.graph.outputs) | {s.node for s in self.graph.states}
        out |= {self.graph.loss} if self.graph.loss is not None else set()
        for st in self.forward + self.backward:
            persistent = isinstance(st, Loop) and st.mode == "persistent"
            out |= {m for k in st.kernels if k.kind in ("gemm", "gather", "loss", "scatter")
                    or (k.kind == "reduction" and not persistent) for m in k.ops}
        return out

    def _float_nodes(self, names: set) -> tuple[str, ...]:
        """The float nodes of ``names``, in graph order."""
        return tuple(n.name for n in self.graph.nodes if n.name in names and n.dtype != INDEX)

    @property
    def gradient_nodes(self) -> tuple[str, ...]:
        """The float nodes whose gradients live in memory (graph order): those a kernel of either
        direction reads or writes as ``d.name`` (a fused kernel keeps the rest in registers), the
        ops of :meth:`_in_memory_ops` and a float input ``x`` (dx). The CUDA backend's gradient
        arena holds these alone (codegen/buffers.py), and rnngraph/memory.py counts them."""
        named = {r[2:].split("[")[0] for k in self.kernels() for r in k.reads + k.writes if r.startswith("d.")}
        return self._float_nodes(named | self._in_memory_ops() | {"x"})

    @property
    def value_nodes(self) -> tuple[str, ...]:
        """The float nodes whose forward values live in memory (graph order): those a kernel of
        either direction reads or writes by name (a fused kernel keeps the rest in registers, and
        a backward kernel recomputes them from its forward kernel's inputs), the ops of
        :meth:`_in_memory_ops` and the graph's inputs. The CUDA backend allocates values for
        these alone (codegen/buffers.py), and rnngraph/memory.py counts them."""
        named = {r.split("[")[0] for k in self.kernels() for r in k.reads + k.writes if not r.startswith("d.")}
        return self._float_nodes(named | self._in_memory_ops() | {n.name for n in self.graph.inputs})

    def options_changed(self, width: int | None = None) -> dict[str, bool]:
        """The options that differ from their defaults for this schedule's S, recurrent width K
        (``width``, computed when None) and precision ({} when the options are not recorded)."""
        if self.options is None:
            return {}
        return self.options.changed(self.streams, _width(self) if width is None else width, self.precision)

    def forward_only(self) -> "Schedule":
        """This schedule without its backward steps: an evaluation-only step's (``rg.compile(...,
        backward=False)``), whose dump, JSON and totals then count the forward only."""
        return replace(self, backward=())

    def __str__(self) -> str:
        return format_schedule(self)


def _phase_depth(p: Phase) -> int:
    """Longest chain of dependent kernels in a phase (a kernel's ops count as values it writes,
    except for ``wgrad`` and ``reduce`` kernels, which only read them: parameter gradients)."""
    depth: dict[str, int] = {}
    for k in p.kernels:
        d = 1 + max((depth[w] for r in k.reads for w in [r.split("[")[0]] if w in depth), default=0)
        for w in k.writes + (() if k.kind in ("wgrad", "reduce") else k.ops):
            depth[w] = d
    return max(depth.values(), default=0)


# ---------------------------------------------------------------------- text
def _ops_text(k: Kernel) -> str:
    if k.kind in ("gemm", "wgrad", "gather", "scatter", "loss", "reduce") or len(k.ops) == 1:
        return ", ".join(k.ops)
    counts = Counter(k.op_names)
    parts = [name if counts[name] == 1 else f"{name} x{counts[name]}" for name in dict.fromkeys(k.op_names)]
    return f"{len(k.ops)} ops [{', '.join(parts)}]"


def _chunks_text(g: Graph, k: Kernel) -> str:
    """`` [V classes in n chunks of c]`` for a kernel computing a node a chunk of its classes at
    a time (a chunked softmax cross-entropy), `` [LSH: K=.. L=.. tables, min active ..]`` for an
    LSH head's, else ''."""
    found = chunking(g, g.by_name[k.ops[0]]) if len(k.ops) == 1 else None
    if found is None:  # an LSH head's kernel: its tables and least active set (ops_lsh.py)
        return lsh_text(g, g.by_name[k.ops[0]]) if len(k.ops) == 1 else ""
    classes, chunk = found
    bounds = chunk_bounds(classes, chunk)
    last = bounds[-1][1] - bounds[-1][0]
    tail = f", the last {last}" if last != chunk and len(bounds) > 1 else ""
    plural = "s" if len(bounds) > 1 else ""
    return f"   [{classes} classes in {len(bounds)} chunk{plural} of {min(chunk, classes)}{tail}]"


def loop_precision(s: Schedule) -> str:
    """The operand format of the loops' recurrent products: ``s.precision`` where the schedule's
    options put them on tensor cores (``loop_tensor_cores``; a persistent loop's by ``mma.sync``,
    codegen/loop_mma.py, a per-timestep loop's on cuBLAS), else ``"fp32"``."""
    return s.precision if s.options is not None and s.options.loop_tensor_cores else "fp32"


def gemm_precision(s: Schedule, step, k: Kernel) -> str | None:
    """The operand format of kernel ``k`` of ``step`` (a Phase or Loop of ``s``) when it is a GEMM
    (kind gemm or wgrad), else None: ``s.precision`` in a phase (the once-per-window products:
    hoisted, input gradients, weight gradients), :func:`loop_precision` in a loop."""
    if k.kind not in ("gemm", "wgrad"):
        return None
    return s.precision if isinstance(step, Phase) else loop_precision(s)


def _kernel_line(k: Kernel, indent: str, g: Graph, precision: str | None = None) -> str:
    text = f"{indent}{k.name:<4} {k.kind:<9}  {_ops_text(k)}"
    if k.reads:
        text += f"  <- {', '.join(k.reads)}"
    if k.kind not in ("gemm", "wgrad", "gather") or set(k.writes) != set(k.ops):
        text += f"  -> {', '.join(k.writes)}" if k.writes else ""
    tag = f"   [{precision}]" if precision else ""
    return f"{text}   {k.rows} x {k.cols}{_chunks_text(g, k)}{tag}"


def _fmt_flops(f: float) -> str:
    for unit, scale in (("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if f >= scale:
            return f"{f / scale:.3g} {unit}"
    return f"{f:.3g} FLOP"


def _sync_text(s: Loop) -> str:
    """Where a persistent loop's grid syncs (passes/grid_syncs.py); graph mode: every level."""
    if s.mode != "persistent":
        return ""
    syncs = s.sync_after
    if not syncs:
        return ", no grid sync"
    return f", grid sync after level{'s' if len(syncs) > 1 else ''} {', '.join(map(str, syncs))}"


def _step_lines(s, window: int, columns: int, g: Graph, sched: Schedule | None = None) -> list[str]:
    """The dump's lines of step ``s``; with ``sched`` (a schedule in a precision other than fp32)
    each GEMM line ends with its operand format (:func:`gemm_precision`)."""
    tagged = (lambda k: gemm_precision(sched, s, k)) if sched is not None else (lambda k: None)
    if isinstance(s, Phase):
        lines = [f"  {s.name}  [once per window over {columns} columns]"]
        lines += [_kernel_line(k, "    ", g, tagged(k)) for k in s.kernels]
        return lines
    span = f"t={window - 1}..0" if s.reverse else f"t=0..{window - 1}"
    syncs = s.reduction_syncs
    extra = f" + {syncs} reduction sync{'s' if syncs != 1 else ''}" if syncs else ""
    lines = [f"  {s.name} {span}  {s.mode}, {s.levels} level{'s' if s.levels != 1 else ''}{extra} per timestep "
             f"(initiation interval){_sync_text(s)}, {s.ticks} ticks"]
    if s.early_sums:
        lines.append(f"    row sums one level early (no reduction sync): {', '.join(s.early_sums)}")
    if s.flagged:
        lines.append(f"    flagged exchange (readers poll each element's timestep tag): {', '.join(s.flagged)}")
    if s.folded_biases:
        lines.append("    folded biases (added by the loop's product stores; no bias kernel over the window): "
                     + ", ".join(f"{w}'s bias by {m}'s store" for m, w in s.folded_biases))
    if s.post_sums:
        lines.append(f"    gain and bias gradients after the loop (reduce kernels): {', '.join(s.post_sums)}")
    for offset, label in s.stages:
        lag = "t" if offset == 0 else (f"t+{offset}" if s.reverse else f"t-{offset}")
        lines.append(f"    stage {offset} ({lag})  {label}")
        for level in range(1, s.levels + 1):
            ks = s.at(level, offset)
            for j, k in enumerate(ks):
                head = f"      level {level}  " if j == 0 else " " * 15
                lines.append(_kernel_line(k, head, g, tagged(k)))
    return lines


def _width(s: Schedule) -> int:
    """K of the schedule's widest recurrent product (the options' defaults depend on it)."""
    from .passes.recurrence import recurrent_width  # (the passes import this module)
    return recurrent_width(s.graph)


def _options_line(s: Schedule, width: int) -> list[str]:
    """The options that differ from the defaults for the schedule's S, K (``width``) and precision
    (none: no line)."""
    changed = s.options_changed(width)
    if not changed:
        return []
    notes = {"loop_tensor_cores": " (no effect in fp32: the loops' products have no other precision to take)"}
    shape = f"S={s.streams}" + (f", K={width}, {s.precision}" if s.precision != "fp32" else "")
    return [f"  options (not the defaults for {shape}): " +
            ", ".join(f"{k}={v}" + (notes.get(k, "") if v and s.precision == "fp32" else "") for k, v in changed.items())]


def _precision_line(s: Schedule, width: int) -> list[str]:
    """What a precision other than fp32 changes (fp32: no line, the dump as before), and S and K
    (``width``), by which the defaults put the loops' products on tensor cores."""
    if s.precision == "fp32":
        return []
    on = loop_precision(s) != "fp32"
    by_default = on == loop_tensor_cores_by_default(s.streams, width)  # else the options say otherwise
    why = (f"S = {s.streams}, K = {width} {'meet' if on else 'do not meet'} the default's rule, {LOOP_TENSOR_CORES_RULE}"
           if by_default else f"loop_tensor_cores={on} in the options")
    p = s.precision
    if on:
        modes = {st.mode for st in s.forward + s.backward if isinstance(st, Loop)}
        how = " and ".join({"persistent": "by mma.sync inside the persistent kernels"}.get(m, "on cuBLAS per timestep")
                           for m in sorted(modes))
        return [f"  precision {p}: the once-per-window GEMMs on tensor cores through cuBLAS and the loops' recurrent "
                f"products {how} ({p} operands, fp32 accumulation; {why}); a chunked softmax's products and "
                f"pointwise math stay fp32"]
    force = "; RNNGRAPH_LOOP=mma=1 puts them on tensor cores too" if by_default else ""
    return [f"  precision {p}: the once-per-window GEMMs on tensor cores ({p} operands, fp32 accumulation); "
            f"the loops' recurrent products ({why}{force}), a chunked softmax's products and pointwise math "
            f"stay fp32"]


def format_schedule(s: Schedule) -> str:
    """The schedule dump: header, the options that differ from the defaults, the precision (when
    not fp32: then each GEMM line ends with its operand format), forward and backward steps
    (``backward  none (forward only)`` without any), then totals."""
    g = s.graph
    hidden = sorted({g.by_name[st.node].size for st in g.states})
    prec = f"  precision={s.precision}" if s.precision != "fp32" else ""
    width = _width(s)  # K, by which the options' defaults choose
    lines = [f"schedule {g.name}  window={s.window} streams={s.streams} {s.dtype}{prec}  "
             f"hidden={','.join(map(str, hidden)) or '-'}  plan={s.plan}",
             f"  why: {s.reason}", *_options_line(s, width), *_precision_line(s, width), "forward"]
    sched = s if s.precision != "fp32" else None
    for step in s.forward:
        lines += _step_lines(step, s.window, s.window * s.streams, g, sched)
    lines.append("backward" if s.backward else "backward  none (forward only)")
    for step in s.backward:
        lines += _step_lines(step, s.window, s.window * s.streams, g, sched)
    par = s.work / max(s.critical_path, 1)
    lines.append(f"work {_fmt_flops(s.work)}   critical path {s.critical_path} levels   "
                 f"parallelism bound {_fmt_flops(par)}/level   launches/window {s.launches}")
    return "\n".join(lines) + "\n"
