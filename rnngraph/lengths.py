"""Variable-length sequences: the masked graph of a network and the masks a call feeds it.

A window holds S streams of T timesteps; stream s is valid for its first ``lengths[s]`` steps
(0 <= lengths[s] <= T). PyTorch's packed sequences define what that means (``nn.LSTM`` on a
``PackedSequence``): a stream's state stops changing after its last valid step, so its final
state is the state at its own length (the initial state for a length of 0); its outputs past the
length are zero; and no gradient flows through a padded step.

rnngraph builds that into the graph rather than into each backend. The masked graph of a network
(``Sequential.masked_graph``) traces every cell as written, then replaces

- each state's next value ``s' = cell(...)`` by ``select(m, s', s[t-1])``, and
- each cell's output ``y`` by ``select(m, y, m)`` (m is 0 where it is not kept, so: zero;
  an output that is a state's next value is read from the held state, the same where kept),

where ``m`` is a float graph input ``lengths.mask<size>`` of the state's size carrying the
attribute ``lengths`` (one input per distinct size, shared by the layers), 1 at (t, s) for
t < lengths[s] and 0 after. ``select`` (rnngraph/ops.py) is a pointwise op, so every backend —
the NumPy executor, the persistent loop kernels, the graph-replayed loops — runs it as any other
op, and its gradient rule sends nothing through a padded step. The masks are data, like dropout
masks (rnngraph/masks.py): :func:`length_masks` makes them from the lengths.

The padded steps of the input are set to zero before a call (:func:`zero_padded_steps`): the
held values and the gradient then stay finite whatever the padding holds (NaN, inf), since a
padded step computes finite values from finite ones and its zero gradient multiplies them.

Since a padded step's values are only held or zeroed, its work can be skipped: the persistent
loop kernels' GEMM work items take the streams longest first (:func:`stream_order`, set with
the masks by the GPU paths of ``rg.compile_rnn``, ``rnngraph.torch.RNN`` and ``rg.compile``'s
training step) and at step t run only over the streams still within their lengths
(rnngraph/codegen/tuning.py ``skip``); the outputs they leave unwritten are zeroed before the
loop, so the padded steps stay finite.

A state read more than one step back (``rg.State(delay=2)``, ``h.delayed(k)``) has no packed
counterpart; tracing such a cell for lengths raises GraphError.
"""
from __future__ import annotations

import numpy as np

from .arrays import array_kind
from .errors import GraphError, ShapeError
from .ir import FLOAT, Graph

__all__ = ["check_lengths", "hold_padded_steps", "length_inputs", "length_masks", "stream_order", "valid_steps",
           "with_lengths", "zero_padded_steps"]

LENGTHS = "lengths"  # the attribute marking a graph input as a variable-length mask


def mask_name(size: int) -> str:
    """The graph input holding the mask of values of ``size`` elements."""
    return f"lengths.mask{size}"


def hold_padded_steps(b, cell_name: str, placeholders: dict, nexts: dict, out):
    """Mask one traced cell for variable lengths (see the module docstring).

    b: the rnngraph.trace.Builder tracing it (its ``length_masks`` dict: size -> mask Value);
    placeholders: state argument -> the Value that reads it one step back; nexts: state
    argument -> its next Value (replaced in place); out: the cell's output Value. Returns the
    masked output. Raises GraphError for a state read more than one step back."""
    for arg, ph in placeholders.items():
        depth = max([d for n in b.nodes.values() for i, d in n.args if i == ph.id] or [ph.delay])
        if ph.delay != 1 or depth != 1:
            raise GraphError(f"cell {cell_name!r}: state {arg!r} is read {max(depth, ph.delay)} steps back; "
                             f"variable-length sequences (lengths=) need states read one step back only "
                             f"(a packed sequence has no earlier step to hold)")
    held = {}  # next Value's id -> its held Value
    for arg, nv in list(nexts.items()):
        if arg in placeholders and getattr(nv, "size", None) == placeholders[arg].size:  # else: _bind_states names it
            nexts[arg] = b.add("select", [_mask(b, nv.size), nv, placeholders[arg]], hint=f"{arg}_held")
            held.setdefault(nv.id, nexts[arg])
    # an output that is a state's next value (an LSTM's h) is masked from the held value, equal
    # to it wherever the output is kept: the loop then stores the held state alone, not both
    return zero_past_lengths(b, held.get(getattr(out, "id", None), out), hint="y_masked")


def zero_past_lengths(b, value, name: str | None = None, hint: str | None = None):
    """``select(m, value, m)``: ``value`` where a stream is within its length, 0 past it (m the
    mask ``lengths.mask<size>`` of the value's size), for the rnngraph.trace.Builder ``b``
    tracing a masked graph (``b.length_masks`` not None). Named ``name`` (else by ``hint``)."""
    m = _mask(b, value.size)
    return b.add("select", [m, value, m], name=name, hint=hint)


def _mask(b, size: int):
    if size not in b.length_masks:
        b.length_masks[size] = b.add("input", size=size, dtype=FLOAT, attrs={LENGTHS: 1}, name=mask_name(size))
    return b.length_masks[size]


def length_inputs(g: Graph) -> dict[str, int]:
    """Variable-length mask input -> its size, in graph order (empty for an unmasked graph)."""
    return {n.name: n.size for n in g.inputs if LENGTHS in n.attr}


def check_lengths(lengths, T: int, S: int, what: str = "lengths", swapped: str | None = None) -> np.ndarray:
    """``lengths`` as an int64 array (S,), checked: a sequence of S integers in [0, T], any order
    (no sorting needed). Accepts lists, NumPy arrays and CPU tensors (anything np.asarray
    takes); unlike pack_padded_sequence, float lengths are refused, not truncated. Raises
    ShapeError for a wrong shape, TypeError for non-integers and for device arrays (CUDA tensors
    included), ValueError naming the first stream out of range. ``swapped``: the caller's flag
    that sets x's layout (the torch module's ``batch_first``), named in the ShapeError when T
    lengths come for S streams (x's time and batch axes swapped?)."""
    if array_kind(lengths) != "host" or getattr(getattr(lengths, "device", None), "type", "cpu") != "cpu":
        raise TypeError(f"{what} must be host data (a list, a NumPy array or a CPU tensor), as PyTorch's "
                        f"pack_padded_sequence takes them; got an array on {getattr(lengths, 'device', 'a device')}")
    if isinstance(lengths, (str, bytes)):
        raise TypeError(f"{what}: expected integer lengths, got {type(lengths).__name__}")
    a = np.asarray(lengths)
    if a.ndim != 1 or a.shape[0] != S:
        hint = (f" (x's window is {T}: were its time and batch axes swapped? see {swapped})"
                if swapped and a.ndim == 1 and a.shape[0] == T != S else "")
        raise ShapeError(f"{what}: expected one length per stream, shape ({S},), got shape {a.shape}{hint}")
    if a.dtype == bool or not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{what}: expected integer lengths, got dtype {a.dtype}")
    bad = np.flatnonzero((a < 0) | (a > T))
    if bad.size:
        s = int(bad[0])
        raise ValueError(f"{what}[{s}] = {int(a[s])} is outside [0, T = {T}] (the window has {T} timesteps)")
    return a.astype(np.int64)


def valid_steps(lengths: np.ndarray, T: int, like, dtype="float32"):
    """(T, S) of ``dtype``: 1 where t < lengths[s], else 0, for checked ``lengths`` (S,): a torch
    tensor on ``like``'s device when ``like`` is a CUDA tensor (the lengths moved there through
    pinned memory, without waiting for the device), else a NumPy array."""
    if is_cuda_tensor(like):
        import torch
        dev = torch.as_tensor(np.asarray(lengths)).pin_memory().to(like.device, non_blocking=True)
        return (torch.arange(T, device=like.device)[:, None] < dev[None, :]).to(like.dtype)
    return (np.arange(T)[:, None] < np.asarray(lengths)[None, :]).astype(dtype)


def stream_order(valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(order, counts) from ``valid`` (T, S) NumPy of :func:`valid_steps`: the streams longest
    first, (S,) int32 (ties in stream order), and the number of streams within their lengths at
    each step, (T,) int32 -- the first counts[t] of the order. The persistent loop kernels' GEMM
    work items take the streams in this order and skip the items of streams that all ended
    (rnngraph/codegen/tuning.py ``skip``)."""
    keep = valid > 0
    return (np.argsort(-np.count_nonzero(keep, axis=0), kind="stable").astype(np.int32),
            np.count_nonzero(keep, axis=1).astype(np.int32))


def length_masks(g: Graph, valid) -> dict:
    """The masks of :func:`length_inputs`: name -> (T, S, size), ``valid`` (T, S) of
    :func:`valid_steps` repeated along the size (its kind: NumPy or torch)."""
    T, S = valid.shape
    if isinstance(valid, np.ndarray):
        return {name: np.repeat(valid[:, :, None], size, axis=2) for name, size in length_inputs(g).items()}
    return {name: valid[:, :, None].expand(T, S, size).contiguous() for name, size in length_inputs(g).items()}


def with_lengths(g: Graph, x, masks: dict, valid):
    """(x, masks) of a call of the masked graph ``g``: x with its padded steps zeroed
    (:func:`zero_padded_steps`) and ``masks`` with :func:`length_masks` added, for ``valid``
    (T, S) NumPy of :func:`valid_steps`; both as given when ``valid`` is None (no lengths)."""
    if valid is None:
        return x, masks
    return zero_padded_steps(x, valid), {**masks, **length_masks(g, valid)}


def zero_padded_steps(x, valid):
    """A copy of ``x`` (T, S, ...) floats with the padded steps (``valid`` (T, S) zero) set to
    zero; x as it is for token ids (their padding must be valid ids). NumPy arrays and torch
    tensors; CuPy and numba device arrays as they are (their padding must then be finite)."""
    if type(x).__module__.startswith("torch"):
        import torch
        if not x.is_floating_point():
            return x
        keep = valid.to(torch.bool) if isinstance(valid, torch.Tensor) else torch.from_numpy(valid > 0)
        keep = keep.reshape(keep.shape + (1,) * (x.dim() - 2))
        return torch.where(keep, x, torch.zeros((), dtype=x.dtype, device=x.device))
    if not isinstance(x, np.ndarray) or not np.issubdtype(x.dtype, np.floating):
        return x
    return np.where((valid > 0).reshape(valid.shape + (1,) * (x.ndim - 2)), x, x.dtype.type(0))


def is_cuda_tensor(a) -> bool:
    """Whether ``a`` is a torch tensor on a CUDA device."""
    return type(a).__module__.startswith("torch") and bool(getattr(a, "is_cuda", False))
