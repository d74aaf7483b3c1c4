"""How much memory a compiled step needs, estimated from its schedule before anything is allocated.

Units: bytes, everywhere in this module. The command line checks :func:`estimate` against
:func:`available_host_bytes` / :func:`available_device_bytes` before it compiles a step, so
that ``rnngraph train --hidden 200000`` says in one line that the model does not fit instead
of dying in a NumPy allocation.

What is counted (T = window, S = streams, n = a node's size, b = 4 bytes for float32, 8 for
float64; sums run over the graph's parameters and nodes):

- **NumPy backend** (``device="cpu"``), on the host:
  parameters ``b * sum(param elements)``; when training, their gradients as much again and the
  optimizer's slots ``slots`` times as much (Adam and AdamW 2: m and v; SGD with momentum 1;
  plain SGD 0); activations: the forward values of every node but parameter nodes (which are
  broadcast views), ``T*S*n*b`` each (token ids: ``T*S*8``, int64), and, when training, the
  gradient of every node, ``T*S*n*b`` each; scratch, the largest temporaries: the float64
  draw of the largest parameter at initialisation (8 bytes an element) or two windows
  ``T*S*n*b`` of the largest node (an op's result before it is copied into place, and one
  intermediate value), or three arrays ``T*S*chunk*b`` of a chunked softmax cross-entropy's
  chunk (its logits, their exponentials and the gradient; an ``rg.LSHSoftmax`` head's dense
  evaluation is one chunk of all classes), whichever is largest. An LSH head's bucket tables
  (``LSHConfig.table_bytes()``) are not counted.
- **CUDA backend** (``device="cuda"``, float32), on the GPU, whatever ``training`` says (a
  compiled step allocates its backward buffers too): the values of the schedule's
  ``value_nodes`` and the gradients of its ``gradient_nodes`` (those crossing a kernel boundary,
  and what callers feed or read; a fused kernel keeps the others in registers),
  ``(depth + T)*S*n*4`` each (depth: the node's state depth, 0 for most; a gradient rounded up
  to 16 bytes, its arena's alignment: codegen/buffers.py; ``forward(all_values=True)`` adds the
  other values when first asked), token ids
  ``T*S*4``; parameters, their gradients and two optimizer slots (the backend keeps two for
  every optimizer), ``4 * sum(param elements)`` each, plus a transposed copy of each weight a
  persistent backward loop reads; scratch: a chunked softmax cross-entropy's chunk of logits
  ``T*S*chunk*4`` and three floats a column (codegen/chunked_xent.py). On the host: the
  parameters (drawn there at initialisation, copied back for validation and checkpoints), the
  float64 draw of the largest one, and, when training, the optimizer slots a checkpoint copies
  back.

Left out: the recurrent states ((depth, S, n): T times smaller than a node's window), the
interpreter itself, and on a GPU the CUDA context, cuBLAS's workspace and layer norms' row
sums. Temporaries depend on the ops, so the estimate is approximate: the peak that tracemalloc
measures for the NumPy backend at the sizes tests/test_memory.py tries lies between 0.85 and
1.25 times it (a plain LSTM's near 0.9, a layer-norm LSTM's forward, whose layer norms make
more temporaries, near 1.2). Far above what is available, it surely does not fit; near the
limit the check can be wrong either way (a run it lets through may then fail in an
allocation).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, fields

import numpy as np

from .ir import INDEX, Graph
from .ops import chunking, lsh_setting
from .schedule import Loop, Schedule

#: Bytes per element of each float dtype name.
ITEMSIZE = {"float32": 4, "float64": 8}


@dataclass(frozen=True)
class Estimate:
    """Bytes of one kind of memory (the host's or a GPU's), by what they hold. ``+`` adds two
    steps' estimates: their arrays, and the larger of their scratch (steps run one at a time,
    so their temporaries do not meet)."""

    parameters: int = 0   #: the parameter arrays
    gradients: int = 0    #: the parameters' gradients
    optimizer: int = 0    #: the optimizer's slots (Adam's m and v, SGD's momentum)
    activations: int = 0  #: node values over the window and, when training, their gradients
    scratch: int = 0      #: the largest temporaries (see the module docstring)

    @property
    def total(self) -> int:
        """All of it, in bytes."""
        return self.parameters + self.gradients + self.optimizer + self.activations + self.scratch

    @property
    def model(self) -> int:
        """What the model's size fixes (parameters, gradients, optimizer slots), in bytes."""
        return self.parameters + self.gradients + self.optimizer

    def __add__(self, other: Estimate) -> Estimate:
        added = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        return Estimate(**{**added, "scratch": max(self.scratch, other.scratch)})


@dataclass(frozen=True)
class Footprint:
    """What a step needs on the host and on the GPU (zero on the CPU backend); ``+`` adds two."""

    host: Estimate = Estimate()
    gpu: Estimate = Estimate()

    def __add__(self, other: Footprint) -> Footprint:
        return Footprint(self.host + other.host, self.gpu + other.gpu)


def optimizer_slots(config: dict) -> int:
    """Arrays of a parameter's size that the NumPy optimizer of ``config``
    (:meth:`rnngraph.optim.Optimizer.config`) keeps: adam, adamw 2; sgd 1 with momentum, else 0.
    ValueError for another name."""
    name = config.get("name")
    if name in ("adam", "adamw"):
        return 2
    if name == "sgd":
        return 1 if config.get("momentum") else 0
    raise ValueError(f"unknown optimizer {name!r} (adam, adamw, sgd)")


def parameter_elements(graph: Graph) -> int:
    """Elements of all the graph's parameters together."""
    return sum(int(np.prod(p.shape)) for p in graph.params)


def _transposed_elements(schedule: Schedule) -> int:
    """Elements of the weights the CUDA backend keeps a transposed copy of: the 2-D parameters
    of the GEMMs inside persistent backward loops (rnngraph.codegen.loop reads them transposed)."""
    g = schedule.graph
    names = {p for step in schedule.backward if isinstance(step, Loop) and step.mode == "persistent"
             for k in step.kernels if k.kind == "gemm" for p in k.params
             if len(g.param_by_name[p].shape) == 2}
    return sum(int(np.prod(g.param_by_name[p].shape)) for p in names)


def _chunk_elements(g: Graph, columns: int) -> int:
    """Elements of the largest chunk of logits (``columns`` x classes per chunk) a chunked
    softmax cross-entropy of ``g`` computes at once (an LSH head's dense evaluation: one chunk
    of all classes); 0 without one."""
    found = [chunking(g, n) or ((g.param_by_name[n.params[0]].shape[0],) * 2 if lsh_setting(g, n) else None)
             for n in g.nodes]
    return max((columns * min(classes, chunk) for classes, chunk in filter(None, found)), default=0)


def estimate(schedule: Schedule, device: str = "cpu", training: bool = True, slots: int = 2) -> Footprint:
    """The bytes a step compiled from ``schedule`` (its graph, window T, streams S and dtype)
    needs on ``device`` ("cpu": the NumPy backend, "cuda": the generated kernels), as the
    module docstring counts them. training: whether it trains (gradients, optimizer slots and
    node gradients) or only runs forward (evaluation, sampling); slots: the optimizer's arrays
    per parameter (:func:`optimizer_slots`; the CUDA backend keeps 2 whatever it is).
    Returns a :class:`Footprint`; allocates nothing. ValueError for another device or dtype."""
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    if schedule.dtype not in ITEMSIZE:
        raise ValueError(f"dtype {schedule.dtype!r} is not supported (float32, float64)")
    g, T, S = schedule.graph, schedule.window, schedule.streams
    params = parameter_elements(g)
    draw = 8 * max((int(np.prod(p.shape)) for p in g.params), default=0)  # init_params: float64, then cast
    if device == "cuda":
        depth = {s.node: s.depth for s in g.states}
        size = {n.name: (depth.get(n.name, 0) + T) * S * n.size for n in g.nodes if n.dtype != INDEX}
        floats = sum(size[name] for name in schedule.value_nodes)
        # the gradient arena holds the schedule's gradient nodes, each starting 16-byte aligned
        grads = sum(-(-size[name] // 4) * 4 for name in schedule.gradient_nodes)
        ids = sum(T * S for n in g.nodes if n.dtype == INDEX)
        chunk = _chunk_elements(g, T * S)
        gpu = Estimate(parameters=4 * (params + _transposed_elements(schedule)), gradients=4 * params,
                       optimizer=4 * 2 * params, activations=4 * (floats + grads + ids),
                       scratch=4 * (chunk + 3 * T * S) if chunk else 0)
        host = Estimate(parameters=4 * params, optimizer=4 * slots * params if training else 0, scratch=draw)
        return Footprint(host, gpu)
    b = ITEMSIZE[schedule.dtype]
    values = sum(T * S * (8 if n.dtype == INDEX else b * n.size) for n in g.nodes if n.op != "param")
    grads = sum(T * S * b * n.size for n in g.nodes) if training else 0
    largest_window = T * S * b * max((n.size for n in g.nodes), default=0)
    host = Estimate(parameters=b * params, gradients=b * params if training else 0,
                    optimizer=b * slots * params if training else 0, activations=values + grads,
                    scratch=max(draw, 2 * largest_window, 3 * b * _chunk_elements(g, T * S)))
    return Footprint(host=host)


# ---------------------------------------------------------------------------------- the check
class NotEnoughMemory(MemoryError):
    """An estimate above the memory there is (:func:`check_fits`); the message is one line."""


def check_fits(need: Footprint, what: str, advice: str, host_available: int | None,
               gpu_available: int | None) -> None:
    """Raise :class:`NotEnoughMemory` when ``need.host.total`` exceeds ``host_available`` or
    ``need.gpu.total`` exceeds ``gpu_available`` (bytes; None: unknown, not checked), with one
    line: ``{what} needs about 2.9 TiB of memory (parameters, gradients and optimizer slots
    2.9 TiB, activations and temporaries 31 GiB); this machine has 23 GiB available: {advice}``
    (on the GPU: ``... of GPU memory ...; the GPU has 80 GiB free: ...``)."""
    for est, have, kind, there in ((need.host, host_available, "memory", "this machine has {} available"),
                                   (need.gpu, gpu_available, "GPU memory", "the GPU has {} free")):
        if have is not None and est.total > have:
            raise NotEnoughMemory(
                f"{what} needs {'about ' if est.total < MOST_SAID else ''}{format_bytes(est.total)} of {kind} "
                f"(parameters, gradients and optimizer "
                f"slots {format_bytes(est.model)}, activations and temporaries "
                f"{format_bytes(est.activations + est.scratch)}); {there.format(format_bytes(have))}: {advice}")


# ---------------------------------------------------------------------------------- what there is
def available_host_bytes(meminfo: str = "/proc/meminfo") -> int | None:
    """Bytes of host memory available to a new allocation: Linux's ``MemAvailable`` (free
    memory plus what the kernel can reclaim, e.g. the page cache), else free physical pages
    (``os.sysconf``); None where neither can be read."""
    try:
        with open(meminfo, encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the file says kB: KiB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):  # not on this system
        return None


def available_device_bytes() -> int | None:
    """Free bytes of the current CUDA device as the driver reports them; None without a GPU,
    in numba's CUDA simulator, or where numba-cuda is not installed."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return None
    try:
        from numba import cuda
        if not cuda.is_available():
            return None
        free, _total = cuda.current_context().get_memory_info()
        return int(free)
    except Exception:  # pragma: no cover - depends on the machine
        return None


#: From this many bytes :func:`format_bytes` says ``more than 1,000 PiB`` (``--hidden 10**23``
#: needs some 10**33 PiB: no machine comes near either).
MOST_SAID = 1000 * 2**50


def format_bytes(n: int) -> str:
    """``n`` bytes in binary units, 2 to 3 significant digits: ``512 B``, ``1.5 KiB``, ``23 GiB``,
    ``1.2 TiB``; from :data:`MOST_SAID` bytes ``more than 1,000 PiB``."""
    if n >= MOST_SAID:
        return "more than 1,000 PiB"
    value, unit = float(n), "B"
    for next_unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024:
            break
        value, unit = value / 1024, next_unit
    if unit == "B":
        return f"{int(value)} B"
    return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"


__all__ = ["Estimate", "Footprint", "estimate", "NotEnoughMemory", "check_fits", "optimizer_slots", "parameter_elements", "available_host_bytes",
           "available_device_bytes", "format_bytes", "ITEMSIZE", "MOST_SAID"]
