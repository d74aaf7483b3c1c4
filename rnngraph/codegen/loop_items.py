"""The work items of a LoopKernelPlan (codegen/loop_plan.py): a level's stages and the kernels in
them -- GEMM row loops with their item shape and K-split, pointwise kernels with their device
function's flavour, layer-norm row sums -- as data the emitters read.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..schedule import Kernel
from .loop_prefetch import Prefetch
from .pointwise import STREAM_ORDER


@dataclass(frozen=True)
class GemmTerm:
    """One product of a GEMM row loop: ``weight`` the read of W at {r} (global) or {rem} (shared
    copy) and {k}; the vector ``array[row, {s}, {k}]`` (its buffer and row expression: the FFMA
    loops read :attr:`vector`, the tensor-core loops' 16-byte loads the parts); ``flag`` (flag
    buffer, row) where the vector is polled from flag words (passes/flag_exchange.py), else None.
    ``prepared``: the weight is read from a shared copy already in the tensor-core operand format
    (a WeightCopy with ``convert``: TF32-rounded floats, or bf16 pairs packed in uint32 words, {k}
    then the pair's index). ``weight4``: the read of W's columns {k} .. {k} + 3 with one 16-byte
    load (the tiled row loops' on the GPU, codegen/loop_tiles.py; "" where the weight's rows are
    not aligned for it)."""

    weight: str
    array: str
    row: str
    flag: tuple | None
    prepared: bool = False
    weight4: str = ""

    @property
    def vector(self) -> str:
        """The read of the vector at {s}, {k}."""
        return self.vector_at(self.row)

    def vector_at(self, row: str) -> str:
        """The read of the vector at {s}, {k} with its row expression held in the name ``row``."""
        return f"{self.array}[{row}, {{s}}, {{k}}]"


@dataclass(frozen=True)
class TileShape:
    """A tiled row loop's layout (codegen/loop_tiles.py): warps of ``lanes`` lanes in
    ``row_groups`` row groups by lanes // row_groups stream groups; ``stream_warps`` warps cover
    the streams; a k slice ``kslice`` columns (a multiple of 4); the partial sums' array of
    ``words`` floats, at word ``offset`` of the dynamic shared memory (-1: an array of its own)."""

    row_groups: int
    lanes: int
    stream_warps: int
    kslice: int
    words: int
    offset: int = -1

    @property
    def stream_lane_groups(self) -> int:
        """The lane groups of a warp along the streams (not LoopTuning ``groups``)."""
        return self.lanes // self.row_groups


@dataclass(frozen=True)
class GemmRows:
    """One loop over a block's owned GEMM rows (codegen/loop_gemm.py), after the line ``comment``:
    ``reps`` rows a unit of the level's ``unit``, ``inner`` the reduced dimension, ``store`` the
    statement with {r}, {s}, {acc}. Work items of ``rows`` rows x ``streams`` streams, ``items`` of
    them at most a block; ``ksplit`` workers an item (1: none), their partial sums in the shared
    array ``partials``; the inner loop unrolled ``unroll`` times; ``butterfly``: the item's partial
    sums reduced across the warp by the transpose butterfly (else a tree a sum, or no shuffles in
    the simulator).

    ``mma`` ("tf32" or "bf16"; "" for none): the item's products run on tensor cores, a warp per
    item of ``rows`` = 16 x (row tiles) rows and ``streams`` = 8 x (stream tiles) streams, each
    tile one ``mma.sync`` accumulator (codegen/loop_mma.py); ``unroll`` then counts k-steps of 8
    (TF32) or 16 (bf16) columns. ``chunked``: the inner dimension's whole chunks of four k-steps
    (MMA_CHUNK columns) read the vectors with 16-byte loads and the weights in a chunk's
    permuted column order (codegen/loop_mma.py), the rest k-step by k-step; ``pipelined``
    (LoopTuning ``pipeline``): the chunk loop loads the next chunk's vectors before this chunk's
    products (their registers twice). ``swapped``: items of
    8 rows x 16 streams, the streams the ``mma`` tile's 16 (A: the vectors) and the rows its 8 (B:
    the weights), for blocks that own no more than 8 rows. ``rounding`` ("tf32" or "bf16"; "" for none): the FFMA loop
    rounds both operands of each product to that format first (the simulator's stand-in for the
    tensor cores, rounding as rnngraph/precision.py does).

    ``skip`` (the FFMA loops of a variable-length graph with LoopTuning ``skip``): the items
    take the streams in the stream order ``O0`` (S,) and at step t only the items over its first
    ``O1[t]`` streams run (codegen/buffers.py ``order``, ``valid_streams``, int32); the others
    store nothing (a forward GEMM's output is zeroed before the kernel: LoopKernelPlan
    ``unwritten``; a backward's would add zero). Exact: a padded step's values are only held or
    zeroed, and no gradient reaches it (rnngraph/lengths.py). With the streams longest first (the
    buffers' default is every stream at every step), the items of the streams that ended skip
    their work. Tensor-core row loops (``mma``) do not skip; the simulator's stand-in for them
    (``rounding``) does, so there it runs a path the GPU does not take.

    ``tile`` (LoopTuning ``tiles``; None: work items): lane-owned tiles instead of items
    (codegen/loop_tiles.py), laid out by the :class:`TileShape`. Then ``rows`` and ``streams``
    are a lane's (RT x ST), ``ksplit`` the slices of the inner dimension, ``items`` the jobs
    (slices x the warps that cover the streams), ``unroll`` steps of 4 columns a trip,
    ``partials`` the slices' shared array ``kt<i>``; ``butterfly`` is unused.

    ``grouped``: the kernel runs in stream groups (LoopKernelPlan ``stream_groups``): the items'
    streams are places among the block's group's S / G, offset by ``sbase``."""

    comment: str
    terms: tuple
    store: str
    reps: int
    unit: int
    inner: int
    streams: int
    rows: int
    items: int
    ksplit: int
    partials: str
    unroll: int
    butterfly: bool
    mma: str = ""
    rounding: str = ""
    chunked: bool = False
    swapped: bool = False
    skip: bool = False
    pipelined: bool = False
    tile: TileShape | None = None
    grouped: bool = False

    def stream_at(self, place: str) -> str:
        """The stream at ``place`` (an expression in [0, S)): the stream order's entry there where
        ``skip``, the place past the group's first stream where ``grouped``, else ``place``."""
        if self.skip:  # (stream groups are not planned with lengths: codegen/loop_plan.py stream_groups)
            return f"{STREAM_ORDER}[{place}]"
        return f"sbase + {place}" if self.grouped else place


@dataclass(frozen=True)
class GemmItem:
    """A GEMM kernel of a stage: its row loops (forward: one per merged member; backward: one)."""

    kernel: Kernel
    rows: tuple


@dataclass(frozen=True)
class PointwiseItem:
    """A pointwise kernel of a stage: ``local`` (its layer norms' gain and bias gradients go to
    shared-memory sums), ``deferred`` (layer norms whose gradients a kernel after the loop sums),
    ``prefetch`` (its early loads, or None), its unit ``unit``, ``reps`` units of it a unit of the
    level, ``args`` its device function's buffer arguments, and ``grouped``: its streams offset by
    ``sbase`` (as GemmRows ``grouped``)."""

    kernel: Kernel
    local: bool
    deferred: tuple
    prefetch: Prefetch | None
    unit: int
    reps: int
    args: tuple
    grouped: bool = False


@dataclass(frozen=True)
class RowSums:
    """Layer norm ``node``'s row sums for the stage at ``offset``, added into buffer ``out``."""

    offset: int
    node: str
    out: str


@dataclass(frozen=True)
class StagePlan:
    """The kernels (``items``, GemmItem or PointwiseItem) a stage at ``offset`` runs in a level."""

    offset: int
    label: str
    items: tuple


@dataclass(frozen=True)
class LevelPlan:
    """Level ``level``: its unit (0: no kernels), the row sums of its reduction phase (then a
    reduction sync), the kernels whose early loads start here (``prefetch``), its stages, the next
    level's row sums taken at its end (``early``), and whether a grid sync ends it."""

    level: int
    unit: int
    reduction: tuple
    prefetch: tuple
    stages: tuple
    early: tuple
    sync: bool
