"""rnngraph inside PyTorch: :class:`RNN`, an ``nn.Module`` over a compiled network of cells.

``pip install rnngraph[torch]``. CPU tensors run the NumPy backend (float32 or float64: the
module's dtype), CUDA tensors the generated kernels (float32). The module's parameters are
``nn.Parameter``s whose memory the compiled program reads in place (no copy per step); its
gradients come from the compiled backward through a ``torch.autograd.Function``, so
``torch.optim``, ``clip_grad_norm_``, ``torch.no_grad()`` (the inference path: nothing kept
for a backward), ``.to(device)``, ``.double()``, ``state_dict()`` and ``load_state_dict()`` work
as for any module. Conventions follow ``nn.LSTM`` / ``nn.GRU``: inputs (T, B, input_size) (or
(B, T, input_size) with ``batch_first``), outputs (T, B, hidden) of the last layer, initial and
final states of shape (layers, B, hidden) — a tuple in the cell's state order (``(h, c)`` for
an LSTM), a single tensor for a one-state cell (GRU, Elman).
"""
from __future__ import annotations

import inspect
import warnings

try:
    import torch
except ModuleNotFoundError as error:  # one line naming the install, not a bare traceback
    if error.name != "torch":
        raise
    raise ModuleNotFoundError("rnngraph.torch needs PyTorch, which is not installed: pip install torch (on a "
                              "machine without a GPU its CPU build is enough: pip install torch --index-url "
                              "https://download.pytorch.org/whl/cpu)", name="torch") from None
from torch import nn

from . import cells as _cells
from .codegen.tuning import LoopTuning
from .layer import compile_rnn
from .loop_env import check
from .network import Dropout, Sequential
from .reference import init_params
from .errors import GraphError, ShapeError, positive_int
from .lengths import check_lengths
from .passes import PLANS
from .precision import check_precision
from .schedule_options import ScheduleOptions
from .torch_function import CompiledFunction, from_backend, stack_states, to_backend, to_backend_dict
from .torch_packed import PackedSequence, unpack

_TORCH_DTYPES = {torch.float32: "float32", torch.float64: "float64"}

#: nn.LSTM / nn.GRU constructor arguments that RNN does not take, and what takes their place
_NN_ARGUMENTS = {"hidden_size": "give the states' size as hidden, the second argument",
                 "num_layers": "give layers=, the third argument",
                 "bias": "a cell's linear() calls have or lack biases of their own",
                 "proj_size": "there are no projections", "dtype": "call .double() or .to(dtype) on the module",
                 "device": "call .to(device) or .cuda() on the module"}


def _check_cell_kwargs(cell, kwargs: dict) -> None:
    """TypeError for a keyword argument that is neither RNN's nor a configuration argument of
    ``cell`` (an @rg.cell function), naming nn.LSTM's arguments' replacements: without it, the
    cell's tracing reported ``num_layers=2`` as the cell's error."""
    params = inspect.signature(cell.__wrapped__).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    takes = {n for n, p in params.items() if p.kind is p.KEYWORD_ONLY}  # a cell's configuration (rg.cell)
    for k in kwargs:
        if k in takes:
            continue
        if k in _NN_ARGUMENTS:
            raise TypeError(f"RNN() has no argument {k!r} (nn.LSTM's): {_NN_ARGUMENTS[k]}")
        config = sorted(takes - {"hidden"})
        raise TypeError(f"RNN() got an unexpected keyword argument {k!r}: neither RNN's nor a configuration "
                        f"argument of cell {cell.__name__!r} (it takes {', '.join(config) or 'none'} besides hidden)")


def _param_attr(name: str) -> str:
    """A graph parameter's name as a module attribute (``layer0.W.weight`` -> ``layer0_W_weight``)."""
    return name.replace(".", "_")


def _refuse_torch_func() -> None:
    """NotImplementedError inside a torch.func transform (grad, vjp, jacrev, jacfwd, vmap), whose
    wrapped tensors have no memory for the compiled kernels to read (torch's own error was
    "Cannot access data pointer of Tensor that doesn't have storage")."""
    stack = getattr(getattr(torch._C, "_functorch", None), "peek_interpreter_stack", None)
    if stack is not None and stack() is not None:
        raise NotImplementedError(
            "rnngraph.torch.RNN does not run under torch.func transforms (grad, vjp, jacrev, jacfwd, vmap): its "
            "compiled kernels read the tensors' memory; use torch.autograd (loss.backward(), torch.autograd.grad, "
            "torch.autograd.functional.jacobian) and put a batch in B")


class RNN(nn.Module):
    """A stack of ``layers`` rnngraph cells as a PyTorch module (nn.LSTM's conventions).

    Args:
        cell: a cell function (``rg.cells.lstm``, ``rg.cells.gru``, a function decorated with
            ``@rg.cell``) or the name of a standard cell (``"lstm"``); it is called with
            ``hidden=hidden`` and ``cell_kwargs``.
        hidden: the states' size H. layers: stacked copies of the cell (>= 1). The order is not
            nn.LSTM's (input_size, hidden_size, num_layers): give input_size and layers by name.
        input_size: the input's last dimension I (default: H).
        dropout: p of inverted dropout on the outputs of every layer but the last (as
            nn.LSTM), drawn with torch's generator while ``self.training``.
        batch_first: inputs and outputs (B, T, .) instead of (T, B, .) (states stay (layers, B, H)).
        bidirectional: a reverse direction in every layer (nn.LSTM's): outputs (T, B, 2H),
            states (2 * layers, B, H); ``pairs`` holds one compiled RNN per layer running both
            directions side by side (rnngraph/torch_bidirectional.py).
        The arguments below are keyword-only.
        plan: force "wavefront" / "scc-sequential" (default: the cost model's choice).
        cache_size: compiled (T, B) plans kept per device.
        options, tuning: an ``rg.ScheduleOptions`` and an ``rg.LoopTuning`` for every (T, B)
            (default: those of each B, with RNNGRAPH_LOOP's keys; see ``rg.compile_rnn``).
        precision: "fp32" (default), "tf32" or "bf16": the once-per-window GEMMs (input
            products over the window, weight gradients) on tensor cores with operands in that
            format and fp32 accumulation, as ``rg.compile``'s (rnngraph/precision.py); float32
            only (a float64 module with tf32/bf16 is a ValueError at its first call); the CPU
            emulates it. ValueError naming it for another value.

    ``forward(x, h0=None, lengths=None) -> (y, h_T)``: x (T, B, I) (or (T, I) unbatched), or a
    ``PackedSequence``; h0 a tensor (D * layers, B, H) for a one-state cell, else a tuple of
    them in the cell's state order, or None (zeros); y (T, B, D * H) (a PackedSequence for
    one); h_T like h0; D = 2 if bidirectional else 1 (rows: layer 0 forward, layer 0 reverse,
    layer 1 forward, ...). Variable lengths as ``nn.LSTM`` runs a PackedSequence: ``lengths``
    (B,) (host data, any order) or the PackedSequence's; each sequence's state stops after its
    own last step (h_T at its length, h0 for a length of 0), y is zero past it. A state read
    more than one timestep back (``rg.State(delay=d)``) is (layers * d, B, H), each layer's d
    rows oldest first.

    Parameters are named after the graph's (``layer0.W.weight`` -> ``layer0_W_weight``; for the
    standard cells ``W.weight`` is nn.LSTM's ``weight_ih``, ``U.weight`` its ``weight_hh``;
    bidirectional: ``pairs.K.layer0_W_weight`` and ``pairs.K.layer0_reverse_W_weight`` for
    layer K, nn.LSTM's ``weight_ih_lK`` and ``weight_ih_lK_reverse``) and initialised by the
    cells' initialisers from a seed drawn from torch's generator.

    Precision: CPU tensors run in the module's dtype (float32 or float64), CUDA tensors in
    float32 (the generated kernels). Under ``torch.autocast`` the inputs are cast to the
    module's dtype and the computation stays in it (like cuDNN RNNs' fp32 weights under
    autocast, this layer does not run in reduced precision: ``precision=`` chooses that).

    Under ``torch.compile`` the module's forward is not traced (``torch.compiler.disable``): it
    runs between the graphs dynamo compiles around it.

    Raises ValueError / TypeError naming the argument for a wrong shape, dtype or device of x
    or h0 (a CPU tensor for a module on the GPU included), TypeError for options / tuning of
    another type and for a keyword argument that is neither RNN's nor the cell's (nn.LSTM's
    ``num_layers``, ``hidden_size``, ``bias``, ``proj_size``, ``dtype``, ``device`` named with what
    takes their place).
    """

    def __init__(self, cell, hidden: int, layers: int = 1, input_size: int | None = None, dropout: float = 0.0,
                 batch_first: bool = False, bidirectional: bool = False, *, plan: str | None = None,
                 cache_size: int = 8, options: ScheduleOptions | None = None, tuning: LoopTuning | None = None,
                 precision: str = "fp32", **cell_kwargs):
        super().__init__()
        if isinstance(cell, str):
            if not getattr(getattr(_cells, cell, None), "is_cell", False):
                raise ValueError(f"no standard cell {cell!r} in rg.cells (have {sorted(_cells.STANDARD)})")
            cell = getattr(_cells, cell)
        if not getattr(cell, "is_cell", False):
            raise TypeError(f"cell must be an @rg.cell function or a standard cell's name, got {cell!r}")
        _check_cell_kwargs(cell, cell_kwargs)
        hidden, layers = positive_int(hidden, "hidden"), positive_int(layers, "layers")
        input_size = hidden if input_size is None else positive_int(input_size, "input_size")
        try:
            Dropout(dropout)
        except GraphError:
            raise ValueError(f"dropout must be a number in [0, 1), got {dropout!r}") from None
        if plan not in (None, "naive", *PLANS):
            raise ValueError(f"plan must be None, 'naive' or one of {', '.join(PLANS)}; got {plan!r}")
        positive_int(cache_size, "cache_size")
        check(options, tuning)
        self.options, self.tuning = options, tuning
        self.precision = check_precision(precision)
        self.bidirectional = bool(bidirectional)
        if dropout and layers == 1:  # nn.LSTM's warning
            warnings.warn(f"dropout={dropout} has no effect with layers=1: it drops the outputs of every layer but "
                          f"the last", UserWarning, stacklevel=2)
        self.hidden, self.layers, self.input_size = hidden, layers, input_size
        self.dropout, self.batch_first, self.plan, self.cache_size = float(dropout), batch_first, plan, cache_size
        if self.bidirectional:  # one compiled RNN a layer, both directions (rnngraph/torch_bidirectional.py)
            from .torch_bidirectional import LayerPair
            self.pairs = nn.ModuleList(
                LayerPair(cell, hidden, 1, input_size if k == 0 else 2 * hidden, plan=plan, cache_size=cache_size,
                          options=options, tuning=tuning, precision=precision, **cell_kwargs) for k in range(layers))
            self.cell_name, self.state_args = self.pairs[0].cell_name, self.pairs[0].state_args
            self.net = self.graph = None
            return
        cells_ = [cell(hidden=hidden, **cell_kwargs) for _ in range(layers)]
        self.net = self._network(cells_, input_size, dropout)
        self.graph = self.net.graph
        self.cell_name = cells_[0].name
        self._param_attrs = [_param_attr(p.name) for p in self.graph.params]
        self._state_names = [s.name for s in self.graph.states]
        self._mask_nodes = [(n.name, float(n.attr["dropout"]), n.size) for n in self.graph.inputs
                            if "dropout" in n.attr]
        self.state_args = [(arg, ann.delay) for arg, ann in cells_[0].state_args]
        self._state_groups = self._groups()
        seed = int(torch.randint(0, 2 ** 31 - 1, ()).item())
        for name, value in init_params(self.graph, seed, "float32").items():
            self.register_parameter(_param_attr(name), nn.Parameter(torch.from_numpy(value)))
        self._compiled: dict = {}

    def _network(self, cells_: list, input_size: int, dropout: float) -> Sequential:
        """The stack as one rg.Sequential: the cells, rg.Dropout between them."""
        body = []
        for k, c in enumerate(cells_):
            if k and dropout:
                body.append(Dropout(dropout))
            body.append(c)
        return Sequential(*body, input_size=input_size)

    def _groups(self) -> list[list[str]]:
        """Per state argument of the cell, its graph states in h_T's row order (layer by layer)."""
        return [[f"layer{k}.{arg}" for k in range(self.layers)] for arg, _ in self.state_args]

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_compiled"] = {}  # compiled programs are not pickled: the next call compiles again
        return state

    def extra_repr(self) -> str:
        """The constructor's own order and keywords (``RNN(lstm, hidden=5, layers=1, input_size=3)``),
        not nn.LSTM's (input, hidden): the printed form reads back as this class's arguments."""
        s = f"{self.cell_name}, hidden={self.hidden}, layers={self.layers}, input_size={self.input_size}"
        if self.dropout:
            s += f", dropout={self.dropout}"
        s += ", batch_first=True" if self.batch_first else ""
        s += ", bidirectional=True" if self.bidirectional else ""
        return s + (f", precision={self.precision!r}" if self.precision != "fp32" else "")

    # ------------------------------------------------------------------ parameters
    def graph_parameters(self) -> dict[str, nn.Parameter]:
        """Graph parameter name (``layer0.W.weight``) -> the module's parameter, in graph order."""
        return {p.name: getattr(self, _param_attr(p.name)) for p in self.graph.params}

    def _parameter_list(self) -> list:
        """The parameters in graph order (looked up each call: load_state_dict(assign=True)
        replaces them)."""
        return [getattr(self, a) for a in self._param_attrs]

    @property
    def state_names(self) -> list[str]:
        """The compiled network's state names (``layer0.h``, ...), in graph order."""
        return list(self._state_names)

    def compiled(self, device: torch.device, dtype: torch.dtype):
        """The CompiledRNN that runs tensors of ``device`` and ``dtype`` (compiled on first use;
        again when the parameters' memory moved, e.g. after ``.to()``). ValueError for a
        bidirectional RNN (each of its ``pairs`` has its own)."""
        if self.bidirectional:
            raise ValueError("a bidirectional RNN runs one compiled RNN per layer (both directions): "
                             "module.pairs[layer].compiled(...)")
        return self._compiled_for(device, dtype, self._parameter_list())

    def _compiled_for(self, device, dtype, plist: list):
        key = (device, dtype)
        ptrs = tuple(p.data_ptr() for p in plist)
        hit = self._compiled.get(key)
        if hit is not None and hit[0] == ptrs:
            return hit[1]
        params = dict(zip((p.name for p in self.graph.params), plist))
        for name, p in params.items():
            if not p.is_contiguous():  # the program reads the parameters' memory in place
                raise ValueError(f"parameter {_param_attr(name)} is not contiguous; make it so "
                                 f"(p.data = p.data.contiguous())")
        backend = "cuda" if device.type == "cuda" else "cpu"
        if backend == "cuda":
            from numba import cuda
            if (device.index or 0) != cuda.get_current_device().id:
                raise ValueError(f"x is on {device}, but rnngraph's kernels run on numba's current device "
                                 f"(cuda:{cuda.get_current_device().id}): one GPU a process for now")
        values = {name: (p.detach() if backend == "cuda" else p.detach().numpy()) for name, p in params.items()}
        rnn = compile_rnn(self.net, device=backend, dtype=_TORCH_DTYPES[dtype], plan=self.plan,
                          cache_size=self.cache_size, parameters=values, options=self.options,
                          tuning=self.tuning, precision=self.precision)
        self._compiled[key] = (ptrs, rnn)
        return rnn

    @classmethod
    def from_torch(cls, module: nn.Module) -> "RNN":
        """An RNN with the weights of an ``nn.LSTM`` or ``nn.GRU`` (copied): the same layers,
        sizes, dropout, batch_first and bidirectional. ValueError for proj_size or bias=False
        modules (not supported), TypeError for other modules."""
        kinds = {nn.LSTM: "lstm", nn.GRU: "gru"}
        if type(module) not in kinds:
            raise TypeError(f"from_torch takes an nn.LSTM or nn.GRU, got {type(module).__name__}")
        if getattr(module, "proj_size", 0) or not module.bias:
            raise ValueError("from_torch: proj_size and bias=False modules are not supported")
        with warnings.catch_warnings():  # torch warned of dropout with one layer when the module was made
            warnings.filterwarnings("ignore", message=r"dropout=.* has no effect with layers=1")
            out = cls(kinds[type(module)], module.hidden_size, module.num_layers, module.input_size,
                      module.dropout, module.batch_first, module.bidirectional)
        out.load_torch_state_dict(module.state_dict())
        p = next(module.parameters())
        return out.to(device=p.device, dtype=p.dtype)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """``nn.Module.load_state_dict`` (this module's own state dicts). RuntimeError naming
        :meth:`load_torch_state_dict` for an ``nn.LSTM`` / ``nn.GRU`` state dict (``weight_ih_l0``,
        ...), whose keys torch would otherwise list as unexpected."""
        own = self.state_dict()
        if state_dict and not set(state_dict) & set(own) and any(k.startswith("weight_ih_l") for k in state_dict):
            raise RuntimeError("load_state_dict: this is an nn.LSTM / nn.GRU state dict (weight_ih_l0, ...); load it "
                               "with rnn.load_torch_state_dict(state) or make the module with RNN.from_torch(module)")
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def load_torch_state_dict(self, state: dict) -> None:
        """Copy an nn.LSTM / nn.GRU state dict (``weight_ih_l0``, ...) into the parameters
        (PyTorch's gate order is the standard cells'). KeyError naming a missing entry,
        ValueError naming one of another shape (nothing is copied then). A bidirectional RNN
        takes the reverse direction's from the ``_reverse`` entries (``weight_ih_l0_reverse``)."""
        pairs = self._torch_pairs(state, lambda token: f"l{token[len('layer'):]}")  # all checked before any copy
        with torch.no_grad():
            for p, value in pairs:
                p.copy_(value)

    def _torch_pairs(self, state: dict, suffix) -> list:
        """(parameter, state dict value) pairs; ``suffix(token)``: the key suffix (``l0``,
        ``l0_reverse``) of a graph parameter's layer token (``layer0``, ``layer0_reverse``)."""
        if self.bidirectional:
            return [pair for k, child in enumerate(self.pairs)
                    for pair in child._torch_pairs(state, lambda token, k=k: f"l{k}{token[len('layer0'):]}")]
        names = {"W.weight": "weight_ih", "U.weight": "weight_hh", "W.bias": "bias_ih", "U.bias": "bias_hh"}
        pairs = []
        for name, p in self.graph_parameters().items():
            layer, local = name.split(".", 1)
            key = f"{names.get(local, local)}_{suffix(layer)}"
            if key not in state:
                raise KeyError(f"{key!r} (for {name!r}) is not in the state dict")
            if tuple(state[key].shape) != tuple(p.shape):
                raise ValueError(f"{key!r} has shape {tuple(state[key].shape)}, {name!r} needs {tuple(p.shape)}")
            pairs.append((p, state[key]))
        return pairs

    # ------------------------------------------------------------------ running
    def _check(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"x must be a torch.Tensor, got {type(x).__name__}")
        if x.dim() not in (2, 3):
            raise ValueError(f"x: expected (T, B, {self.input_size}) or unbatched (T, {self.input_size}), "
                             f"got shape {tuple(x.shape)}")
        if x.shape[-1] != self.input_size:
            raise ValueError(f"x: expected input size {self.input_size} in the last dimension, got shape "
                             f"{tuple(x.shape)}")
        p = next(self.parameters())
        if x.device != p.device:
            raise ValueError(f"x is on {x.device} but the module's parameters are on {p.device}; move one with .to()")
        if not x.is_floating_point():
            raise TypeError(f"x: expected a floating-point tensor, got {x.dtype}")
        if x.dtype != p.dtype:
            if torch.is_autocast_enabled(x.device.type):
                return x.to(p.dtype)
            raise TypeError(f"x has dtype {x.dtype} but the module's parameters are {p.dtype}")
        if p.dtype not in _TORCH_DTYPES or (x.is_cuda and p.dtype != torch.float32):
            raise TypeError(f"rnngraph runs float32 (and float64 on the CPU), not {p.dtype} on {x.device}")
        return x

    def _states_in(self, h0, B: int, like: torch.Tensor) -> list | None:
        """h0 in nn.LSTM's form -> the graph's states in graph order, each (depth, B, H)
        (bidirectional: per state argument, (2 * layers * depth, B, H) checked)."""
        if h0 is None:
            return None
        parts = (h0,) if len(self.state_args) == 1 and isinstance(h0, torch.Tensor) else h0
        if not isinstance(parts, (tuple, list)) or len(parts) != len(self.state_args):
            raise ValueError(f"h0: expected {'a tensor' if len(self.state_args) == 1 else 'a tuple'} of "
                             f"{len(self.state_args)} state(s) {[a for a, _ in self.state_args]}, "
                             f"got {_described(h0)}")
        by_name, checked = {}, []
        for (arg, depth), t in zip(self.state_args, parts):
            want = (self.layers * (1 + self.bidirectional) * depth, B, self.hidden)
            if not isinstance(t, torch.Tensor) or tuple(t.shape) != want:
                raise ValueError(f"h0 state {arg!r}: expected a tensor of shape {want}, got "
                                 f"{tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
            if t.device != like.device or t.dtype != like.dtype:
                if torch.is_autocast_enabled(like.device.type) and t.device == like.device:
                    t = t.to(like.dtype)
                else:
                    raise ValueError(f"h0 state {arg!r} is {t.dtype} on {t.device}; x is {like.dtype} on {like.device}")
            checked.append(t)
            for k, name in enumerate(self._state_groups[len(checked) - 1] if not self.bidirectional else []):
                by_name[name] = t[k * depth:(k + 1) * depth]
        return checked if self.bidirectional else [by_name[s] for s in self._state_names]

    def _unbatched_states(self, h0):
        """Unbatched states (layers * delay, H) -> (layers * delay, 1, H), in h0's form; ValueError
        naming the state and the shape given (a tuple of the wrong length, or not a tuple, is
        left to _states_in)."""
        parts = (h0,) if isinstance(h0, torch.Tensor) else h0
        if not isinstance(parts, (tuple, list)):
            return h0
        for (arg, depth), t in zip(self.state_args, parts):
            want = (self.layers * (1 + self.bidirectional) * depth, self.hidden)
            if not isinstance(t, torch.Tensor) or tuple(t.shape) != want:
                raise ValueError(f"h0 state {arg!r}: unbatched x (T, {self.input_size}) takes states of shape {want}, "
                                 f"got {tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__}")
        return h0.unsqueeze(1) if isinstance(h0, torch.Tensor) else tuple(t.unsqueeze(1) for t in parts)

    def _states_out(self, stacked: list, unbatched: bool):
        """Per state argument (layers * depth, B, H) -> h_T in h0's form (a tensor or a tuple)."""
        out = [t[:, 0] if unbatched else t for t in stacked]
        return out[0] if len(out) == 1 else tuple(out)

    def _masks(self, T: int, B: int, like: torch.Tensor) -> dict | None:
        masks = {}
        for name, p, size in self._mask_nodes:
            shape = (T, B, size)
            if self.training:
                masks[name] = torch.empty(shape, dtype=like.dtype, device=like.device).bernoulli_(1 - p).div_(1 - p)
            else:
                masks[name] = torch.ones(shape, dtype=like.dtype, device=like.device)
        return masks or None

    # opaque to torch.compile: dynamo would trace into the compiled program's Python (526 frames and
    # recompilation warnings for a 2-layer LSTM over three batches on the CPU); it runs the layer
    # as it is, between the graphs it compiles around it
    @torch.compiler.disable
    def forward(self, x, h0=None, lengths=None):
        """(y, h_T): x (T, B, I) ((B, T, I) with batch_first, (T, I) unbatched) or a
        PackedSequence, float32 (float64 on the CPU after ``.double()``); h0 None, a tensor
        (D * layers, B, H) or a tuple of them in the cell's state order (D = 2 if bidirectional
        else 1); lengths None or (B,) integers in [0, T], host data (PyTorch's
        pack_padded_sequence convention; floats are refused); y (T, B, D * H) of the last layer
        (a PackedSequence laid out as x for one; zero past each length), h_T like h0 (each
        sequence's state at its own length, h0 for a length of 0). B = 0 gives nn.LSTM's empty y
        and h_T without running anything. Raises ValueError / TypeError naming x, lengths or the
        state for a wrong shape, dtype or device (ShapeError, a ValueError, for T = 0)."""
        _refuse_torch_func()
        packed = x if isinstance(x, PackedSequence) else None
        if packed is not None:
            if lengths is not None:
                raise ValueError("lengths: a PackedSequence carries its own lengths; give one or the other")
            where = next(self.parameters()).device
            if packed.data.device != where:
                raise ValueError(f"the PackedSequence is on {packed.data.device} but the module's parameters are on "
                                 f"{where}; move one with .to()")
            x, lengths, packing = unpack(packed)
        x = self._check(x)
        unbatched = x.dim() == 2
        if unbatched and lengths is not None:
            raise ValueError("lengths: unbatched x (T, I) is one sequence; give x as (T, 1, I) with lengths")
        if unbatched:
            x = x.unsqueeze(1)
            if h0 is not None:
                h0 = self._unbatched_states(h0)
        elif self.batch_first and packed is None:
            x = x.transpose(0, 1)
        x = x.contiguous()
        T, B = x.shape[:2]
        if T == 0:  # nn.LSTM's RuntimeError, named
            raise ShapeError(f"x: expected at least one timestep, got {T} in shape {tuple(x.shape)} (time-major)")
        if lengths is not None and B:
            lengths = check_lengths(lengths, T, B, swapped="batch_first" if packed is None else None)
        states = self._states_in(h0, B, x)
        if states is not None:
            states = [s.contiguous() for s in states]
        if B == 0:
            y, stacked = self._empty_batch(x, states, lengths)
        elif self.bidirectional:
            from .torch_bidirectional import forward as bidirectional_forward
            y, stacked = bidirectional_forward(self, x, states, lengths)
        else:
            y, stacked = self._forward(x, states, lengths)
        h_T = self._states_out(stacked, unbatched)
        if unbatched:
            return y[:, 0], h_T
        if packed is not None:
            return packing.pack(y), h_T
        return (y.transpose(0, 1) if self.batch_first else y), h_T

    def _empty_batch(self, x: torch.Tensor, states: list | None, lengths) -> tuple:
        """nn.LSTM's answer for B = 0: y (T, 0, D * H) and states (D * layers * depth, 0, H), no
        work; with autograd they depend on x, h0 and the parameters (zero gradients), so a loss
        over them back-propagates as nn.LSTM's does."""
        if lengths is not None and len(lengths) != 0:
            raise ValueError(f"lengths: expected one length per sequence (0 for B = 0), got {len(lengths)}")
        D = 2 if self.bidirectional else 1
        anchor = x.sum() * 0
        if torch.is_grad_enabled():
            for t in [*self.parameters(), *(states or [])]:
                anchor = anchor + t.sum() * 0
        y = x.new_zeros((x.shape[0], 0, D * self.hidden)) + anchor
        stacked = [x.new_zeros((D * self.layers * depth, 0, self.hidden)) + anchor for _, depth in self.state_args]
        return y, stacked

    def _forward(self, x: torch.Tensor, states: list | None, lengths) -> tuple:
        """(y (T, B, H), per state argument (layers * depth, B, H)) of time-major x (T, B, I)."""
        T, B = x.shape[:2]
        params = self._parameter_list()
        rnn = self._compiled_for(x.device, x.dtype, params)
        masks = self._masks(T, B, x)
        needs_grad = torch.is_grad_enabled() and (
            x.requires_grad or any(p.requires_grad for p in params) or any(s.requires_grad for s in states or []))
        if needs_grad:
            outs = CompiledFunction.apply(rnn, self._state_names, self._state_groups, masks, lengths,
                                           states is not None, x, *(states or []), *params)
            y, stacked = outs[0], list(outs[1:])
        else:
            h0d = None if states is None else dict(zip(self._state_names, states))
            y, h_T = rnn.forward(to_backend(x), to_backend_dict(h0d), train=False,
                                 masks=to_backend_dict(masks), copy_states=False, lengths=lengths)
            y, stacked = from_backend(y, x), stack_states(h_T, self._state_groups, x)
        return y, stacked


def _described(value) -> str:
    """What a wrong ``h0`` is, for its error: "a tuple of 3", "a list of 1" or the type's name."""
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    return type(value).__name__


__all__ = ["RNN"]
