"""``rg.compile_rnn``: a compiled network without a loss, as a layer: ``forward(x, h0)`` and
``backward(dy, dh_T)``.

The shape the field expects of a fused RNN layer (cuDNN, Haste, FlashRNN): a loss-free forward
that keeps what its backward needs on the device (cuDNN's reserve space) and a backward that
returns the gradients of the inputs, the initial states and the parameters. Any loss or head
is the caller's (PyTorch, through :mod:`rnngraph.torch`, or the caller's own code).

The window T and the streams S come from each call's arrays. A plan (the schedule and, on the
GPU, its generated kernels) is compiled per distinct (T, S) and kept in a least-recently-used
cache of ``cache_size`` plans, so a last partial batch or another evaluation batch just work;
all plans share one set of parameters.
"""
from __future__ import annotations

import dataclasses
from collections import OrderedDict

import numpy as np

from .arrays import array_kind, shape_of
from .bidirectional import Bidirectional
from .codegen.tuning import LoopTuning
from .errors import GraphError, ShapeError, positive_int
from .executor import ScheduleExecutor
from .ir import INDEX
from .loop_env import check, from_environment, resolve
from .lengths import check_lengths, valid_steps, with_lengths
from .masks import draw_mask, mask_inputs, mask_seed
from .network import Sequential
from .passes import PLANS
from .passes.recurrence import recurrent_width
from .passes import schedule as build_schedule
from .precision import check_gpu, check_precision
from .reference import DTYPES, check_ids, check_real, dtype_name, id_limits, init_params
from .schedule import Schedule
from .schedule_options import ScheduleOptions


@dataclasses.dataclass
class Pending:
    """What the backward of one training forward needs: the plan it ran, the plan's forward
    count then (a CUDA plan's buffers hold the activations of its latest forward only), the
    NumPy backend's Forward, and the caller's input (outputs are arrays of its kind)."""

    plan: object
    generation: int
    kind: str
    like: object
    fwd: object = None


class CompiledRNN:
    """A network of cells without a loss head, compiled for any window T and streams S.

    Create it with :func:`compile_rnn`. Inputs ``x``: floats of shape (T, S, input_size) (or
    token ids (T, S) when the network starts with an ``rg.Embedding``); the output ``y``: the
    network's output node over the window, (T, S, n); states ``h0`` / ``h_T``: dicts state name
    -> (depth, S, size), the names of ``graph.states`` (``layer0.h``, ``layer0.c``, ...).
    ``parameters``: name -> array, live (NumPy arrays on the CPU, numba device arrays on CUDA;
    PyTorch's layout for the standard cells, see rnngraph/cells.py).

    On CUDA every call runs on the RNN's own stream, ordered after the caller's stream (torch's
    or CuPy's current stream for their arrays) and before it again with events: no
    synchronisation with the host, except to return NumPy arrays.

    ``options`` / ``tuning`` (see :func:`compile_rnn`) serve every (T, S); where one is None, each S
    gets the defaults for that S with the keys of ``RNNGRAPH_LOOP`` as it was when the RNN was
    created (rnngraph/loop_env.py).
    """

    def __init__(self, net: Sequential, device: str, dtype: str, seed: int, plan: str | None,
                 cache_size: int, parameters: dict | None = None, options: ScheduleOptions | None = None,
                 tuning: LoopTuning | None = None, precision: str = "fp32"):
        if not isinstance(net, Sequential):
            raise TypeError(f"rg.compile_rnn expects an rg.Sequential, got {type(net).__name__}")
        if net.has_loss:
            raise GraphError(f"rg.compile_rnn compiles a network without a loss head; drop the "
                             f"rg.{type(net.head).__name__} (or train it with rg.compile)")
        dtype = dtype_name(dtype)
        if device == "cuda" and dtype != "float32":
            raise ValueError("the CUDA backend runs float32")
        self.precision = check_precision(precision, dtype)
        if device == "cuda":
            check_gpu(self.precision)
        if isinstance(cache_size, bool) or not isinstance(cache_size, (int, np.integer)) or cache_size < 1:
            raise ValueError(f"cache_size must be a positive integer, got {cache_size!r}")
        if plan not in (None, "naive", *PLANS):
            raise ValueError(f"plan must be None, 'naive' or one of {', '.join(PLANS)}; got {plan!r}")
        self.net, self.graph = net, net.graph
        if len(self.graph.outputs) != 1:
            raise GraphError(f"network {self.graph.name!r} has {len(self.graph.outputs)} outputs; "
                             f"rg.compile_rnn needs exactly one")
        self.output = self.graph.outputs[0]
        self.device, self.dtype, self.seed, self.plan, self.cache_size = device, dtype, seed, plan, cache_size
        self._given = (options, tuning)
        self._loop_env = from_environment()  # RNNGRAPH_LOOP, once: a bad value fails here, named
        self._recurrent_width = recurrent_width(self.graph)  # K, for the options' defaults
        check(options, tuning)
        self.dropout = mask_inputs(self.graph)
        self.input = self.graph.by_name["x"]
        self.id_limit = id_limits(self.graph).get("x", (None, None))  # (rows of the table, ignored id)
        self._plans: OrderedDict = OrderedDict()
        self._calls = 0  # training forwards so far: the dropout masks' seed
        self.last: Pending | None = None
        if device == "cuda":
            self._check_parameters(parameters or {})
            from .codegen.layer_device import DeviceParameters
            self._device = DeviceParameters(self.graph, init_params(self.graph, seed, dtype), parameters)
        else:
            self._device = None
            self._params = init_params(self.graph, seed, dtype)
            self.set_parameters(parameters or {})  # names and shapes checked
            for name, v in (parameters or {}).items():
                if (isinstance(v, np.ndarray) and v.dtype == DTYPES[dtype] and v.flags.c_contiguous
                        and v.flags.writeable):
                    self._params[name] = v  # used in place: the caller owns the memory

    # ------------------------------------------------------------------ parameters
    @property
    def parameters(self) -> dict:
        """Parameter name -> array: live NumPy arrays (CPU) or numba device arrays (CUDA)."""
        return self._device.arrays if self._device else self._params

    @property
    def state_names(self) -> list[str]:
        """The names of ``h0`` / ``h_T``, in graph order."""
        return [s.name for s in self.graph.states]

    def _check_parameters(self, values: dict) -> None:
        shapes = {p.name: p.shape for p in self.graph.params}
        for name, v in values.items():
            if name not in shapes:
                raise KeyError(f"no parameter {name!r} (have {sorted(shapes)})")
            if shape_of(v) != shapes[name]:
                raise ValueError(f"parameter {name!r}: expected shape {shapes[name]}, got {shape_of(v)}")

    def set_parameters(self, values: dict) -> None:
        """Copy arrays into the named parameters. KeyError for an unknown name, ValueError for a
        wrong shape."""
        self._check_parameters(values)
        if self._device:
            self._device.set(values)
        else:
            for name, v in values.items():
                self._params[name][...] = np.asarray(v)

    def schedule(self, window: int, streams: int) -> Schedule:
        """The schedule of windows of ``window`` timesteps over ``streams`` streams: a cached
        plan's, or built (not compiled) for the asking."""
        for key in ((window, streams, True), (window, streams, False)):
            if key in self._plans:
                return self._plans[key].schedule
        return build_schedule(self.graph, window, streams, self.dtype, self.plan, self._values(streams)[0],
                              precision=self.precision)

    def _values(self, streams: int) -> tuple[ScheduleOptions, LoopTuning]:
        """The schedule options and loop tuning of plans over ``streams`` streams."""
        return resolve(streams, *self._given, self._loop_env, self._recurrent_width, self.precision)

    # ------------------------------------------------------------------ plans
    def _plan(self, T: int, S: int, backward: bool, masked: bool = False):
        """The plan of (T, S), compiled on first use; one with a backward serves inference too.
        ``masked``: the plan of the network's variable-length graph (rnngraph/lengths.py)."""
        tag = ("lengths",) if masked else ()
        for key in ((T, S, True, *tag), (T, S, False, *tag)):
            if key in self._plans and (key[2] or not backward):
                self._plans.move_to_end(key)
                return self._plans[key]
        options, tuning = self._values(S)
        graph = self.net.masked_graph if masked else self.graph
        sched = build_schedule(graph, T, S, self.dtype, self.plan, options, precision=self.precision)
        if self._device:
            from .codegen.layer_device import DevicePlan
            plan = DevicePlan(sched, self._device, backward, tuning)
        else:
            plan = HostPlan(sched, self.dtype, self._params)
        key = (T, S, backward, *tag)
        self._plans.pop((T, S, False, *tag), None)  # a plan with a backward replaces the forward-only one
        self._plans[key] = plan
        plan.key = key
        while len(self._plans) > self.cache_size:
            self._plans.popitem(last=False)
        return plan

    def program(self, window: int, streams: int):
        """The generated :class:`~rnngraph.codegen.program.CudaProgram` (with its backward) of
        the plan of (``window``, ``streams``), compiled on first use and kept in the plan cache,
        its parameter buffers this RNN's parameters: for benchmarks and profilers that enqueue
        its ``run_forward`` / ``run_backward`` on its ``stream`` themselves, without the copies
        and stream events of :meth:`forward` / :meth:`backward` (rnngraph/bench/). Raises
        RuntimeError on the CPU backend, ValueError unless window and streams are positive
        integers."""
        if not self._device:
            raise RuntimeError("CompiledRNN.program: a CPU RNN has no generated program (compile it with "
                               "device='cuda')")
        window = positive_int(window, "CompiledRNN.program: window", ValueError)
        streams = positive_int(streams, "CompiledRNN.program: streams", ValueError)
        return self._plan(window, streams, True).program

    @property
    def cached_plans(self) -> list[tuple]:
        """(T, S, has_backward) of the cached plans, least recently used first; a plan of the
        variable-length graph (calls with ``lengths``) has a fourth entry, ``"lengths"``."""
        return list(self._plans)

    # ------------------------------------------------------------------ checks
    def _window(self, x) -> tuple[int, int]:
        shape = shape_of(x)
        if self.input.dtype == INDEX:
            if len(shape) != 2:
                raise ShapeError(f"x: token ids must have shape (T, S), got {shape}")
        elif len(shape) != 3 or shape[2] != self.input.size:
            doubled = any(isinstance(layer, Bidirectional) for layer in self.net.layers)
            what = (f"input size doubled for rg.Bidirectional: [x, x reversed over each length], 2 x "
                    f"{self.input.size // 2}" if doubled else "input size")
            raise ShapeError(f"x: expected shape (T, S, {self.input.size}) (window, streams, {what}), got {shape}")
        if shape[0] < 1 or shape[1] < 1:
            raise ShapeError(f"x: a window needs T >= 1 and S >= 1, got shape {shape}")
        return shape[0], shape[1]

    def _check_states(self, what: str, states, S: int, complete: bool) -> dict:
        if states is None:
            return {}
        if not isinstance(states, dict):
            raise TypeError(f"{what} must be a dict state name -> (depth, S, size) array, got {type(states).__name__}")
        names = {s.name: s for s in self.graph.states}
        unknown = sorted(set(states) - set(names))
        if unknown:
            raise GraphError(f"{what}: no state(s) {unknown} (states: {sorted(names)})")
        missing = sorted(set(names) - set(states))
        if complete and missing:
            raise GraphError(f"{what} must give every state or none (missing: {missing})")
        for name, a in states.items():
            s = names[name]
            want = (s.depth, S, self.graph.by_name[s.node].size)
            if shape_of(a) != want:
                raise ShapeError(f"{what}[{name!r}]: expected shape {want} (depth, S, size), got {shape_of(a)}")
        return states

    def _masks(self, masks, T: int, S: int, train: bool) -> dict:
        if masks is not None:
            unknown = sorted(set(masks) - set(self.dropout))
            if unknown or set(masks) != set(self.dropout):
                raise GraphError(f"masks must name exactly the dropout masks {sorted(self.dropout)}, got "
                                 f"{sorted(masks)}")
            for m, a in masks.items():
                want = (T, S, self.graph.by_name[m].size)
                if shape_of(a) != want:
                    raise ShapeError(f"masks[{m!r}]: expected shape {want}, got {shape_of(a)}")
            return masks
        if not self.dropout:
            return {}
        dt = DTYPES[self.dtype]
        if not train:
            return {m: np.ones((T, S, self.graph.by_name[m].size), dt) for m in self.dropout}
        return {m: draw_mask(p, (T, S, self.graph.by_name[m].size), mask_seed(self.seed, self._calls, k), dt)
                for k, (m, p) in enumerate(self.dropout.items())}

    # ------------------------------------------------------------------ running
    def forward(self, x, h0: dict | None = None, train: bool = True, masks: dict | None = None,
                copy_states: bool = True, lengths=None):
        """Run the network over the window of ``x``.

        x: (T, S, input_size) real numbers of any dtype (floats, integers or booleans, computed in
        the network's dtype, as ``TrainingStep.train`` takes them; ShapeError for complex values),
        or (T, S) integer token ids for a network that starts with rg.Embedding; h0: state name ->
        (depth, S, size), every state or None (zeros); train: keep the activations for :meth:`backward` (False:
        inference, nothing kept, and on CUDA a plan without a backward); masks: the dropout
        masks (name -> (T, S, width), see rg.Dropout), default drawn from the compile seed when
        training, ones otherwise; copy_states: False lets h_T be views of the plan's device
        buffers (torch tensors on CUDA only), valid until the next forward of this (T, S), for a
        caller that copies them at once (rnngraph.torch stacks the layers' states); lengths:
        None (every stream runs T steps) or the valid steps of each stream, (S,) integers in
        [0, T] in any order, host data (a list, NumPy or a CPU tensor, as PyTorch's
        ``pack_padded_sequence`` takes them): a stream's state stops changing after its last
        valid step (h_T is the state at its length, h0 for a length of 0), y is zero past it and
        no gradient flows through padded steps (PyTorch's packed-sequence semantics; the
        network's variable-length graph, compiled on first use: rnngraph/lengths.py; lengths
        all equal to T run the plain graph, which computes the same).

        Returns (y, h_T): y (T, S, n) the output node, h_T state name -> (depth, S, size), as
        arrays of the kind of ``x`` (NumPy for NumPy; on CUDA torch tensors, CuPy or numba
        device arrays for those). Raises ShapeError / GraphError / TypeError naming the bad
        argument, ValueError for a device array on the CPU backend.
        """
        T, S = self._window(x)
        h0 = self._check_states("h0", h0, S, complete=True)
        masks = self._masks(masks, T, S, train)
        valid = None  # (T, S) NumPy: 1 at the valid steps; the plan makes the masks and zeroes x's padding
        if lengths is not None:
            lengths = check_lengths(lengths, T, S)
            if not np.all(lengths == T):  # else the masks are all ones: the plain graph computes the same
                valid = valid_steps(lengths, T, None, DTYPES[self.dtype])
            else:
                lengths = None
        kind = array_kind(x)
        if self._device is None:
            for what, a in [("x", x)] + [(f"h0[{k!r}]", v) for k, v in h0.items()]:
                if array_kind(a) != "host":
                    raise ValueError(f"{what} is a device array but this RNN runs on the CPU (device='cpu')")
            x = np.asarray(x)
        if self.input.dtype == INDEX and kind == "host":  # (device ids are the caller's to check)
            ids = np.asarray(x)
            if not np.issubdtype(ids.dtype, np.integer):
                raise ShapeError(f"x: token ids must be integers, got {ids.dtype}")
            check_ids("x", ids, *self.id_limit)
        elif kind == "host":
            check_real("x", np.asarray(x))  # floats, integers or booleans, as the training step takes them
        plan = self._plan(T, S, backward=train, masked=lengths is not None)
        if train:
            self._calls += 1
        y, h_T, fwd = plan.forward(x, h0, masks, keep=train, copy_states=copy_states, valid=valid)
        self.last = None
        if self._device:  # the plan's buffers now hold this call's activations (inference too)
            plan.generation += 1
        if train:
            self.last = Pending(plan, plan.generation, kind, x, fwd)
        return y, h_T

    def backward(self, dy, dh_T: dict | None = None, pending: Pending | None = None, input_grads: bool = True):
        """BPTT of the latest training :meth:`forward` (or of ``pending``, a forward's
        :attr:`last` saved by the caller).

        dy: (T, S, n) gradient of the output; dh_T: state name -> (depth, S, size), any subset
        (missing = zero). Returns (dx, dh0, dparams): dx (T, S, input_size) (None for token
        ids), dh0 state name -> (depth, S, size), dparams parameter name -> gradient in its
        shape; arrays of the forward's kind. A forward's activations outlive its backward: a
        second backward of it gives the same gradients for the same seeds (what
        ``retain_graph=True`` asks of the torch module). Raises RuntimeError for a backward
        without a training forward or (CUDA) with a forward of the same (T, S) run in between
        (its buffers hold the newer activations); ShapeError for seeds of the wrong shape.
        """
        pending = pending or self.last
        if pending is None:
            raise RuntimeError("backward needs a forward(..., train=True) first")
        plan = pending.plan
        if plan.generation != pending.generation:
            raise RuntimeError(f"the activations of this forward (T, S = {plan.key[:2]}) were overwritten by a "
                               f"later forward of the same shape on the GPU; call backward before the next "
                               f"forward of that shape")
        T, S = plan.key[:2]
        n = self.graph.by_name[self.output].size
        if shape_of(dy) != (T, S, n):
            raise ShapeError(f"dy: expected shape {(T, S, n)} (the output's), got {shape_of(dy)}")
        dh_T = self._check_states("dh_T", dh_T, S, complete=False)
        dx, dh0, dparams = plan.backward(pending, dy, dh_T, input_grads)
        return (dx, dh0, dparams) if input_grads else (None, None, dparams)


class HostPlan:
    """The NumPy backend's plan of one (T, S): the schedule and its executor."""

    def __init__(self, schedule: Schedule, dtype: str, params: dict):
        self.schedule, self.dtype, self.params = schedule, dtype, params
        self.executor = ScheduleExecutor(schedule, dtype)
        self.generation = 0
        self.key: tuple = ()

    def forward(self, x, h0: dict, masks: dict, keep: bool, copy_states: bool = True, valid=None):
        """(y (T, S, n), h_T name -> (depth, S, size), the Forward if ``keep`` else None), new
        NumPy arrays in the plan's dtype (``copy_states`` changes nothing here); x (T, S, I)
        floats or (T, S) ids, h0 every state or {}; valid (T, S) of rnngraph.lengths.valid_steps
        for a plan of the variable-length graph, else None."""
        x, masks = with_lengths(self.executor.graph, x, masks, valid)
        out = self.executor.graph.outputs[0]
        feed = {"x": x, **{m: np.asarray(v) for m, v in masks.items()}}
        fwd = self.executor.forward(self.params, feed, {k: np.asarray(v) for k, v in h0.items()})
        return fwd.values[out].copy(), fwd.final_states, (fwd if keep else None)

    def backward(self, pending: Pending, dy, dh_T: dict, input_grads: bool = True):
        """(dx (T, S, I) or None for ids, dh0 name -> (depth, S, size), dparams name -> array)
        of ``pending``'s Forward (NumPy computes them all; CompiledRNN drops what is not asked)."""
        g = self.executor.graph
        grads = self.executor.backward(pending.fwd, {g.outputs[0]: np.asarray(dy)},
                                       {k: np.asarray(v) for k, v in dh_T.items()})
        return grads.inputs.get("x"), grads.states, grads.params


def compile_rnn(net: Sequential, device: str = "auto", dtype: str = "float32", seed: int = 0,
                plan: str | None = None, cache_size: int = 8, parameters: dict | None = None,
                options: ScheduleOptions | None = None, tuning: LoopTuning | None = None,
                precision: str = "fp32") -> CompiledRNN:
    """Compile ``net`` (cells, optional rg.Embedding first and rg.Dropout between, no loss head)
    as a layer: :meth:`CompiledRNN.forward` / :meth:`CompiledRNN.backward` for any (T, S).

    device: "cpu" (NumPy), "cuda" (generated kernels, float32) or "auto"; dtype "float32" or
    "float64" (CPU; or the NumPy type); seed: parameter initialisation (as rg.compile) and dropout masks; plan:
    force "wavefront" / "scc-sequential" / "naive" (default: the cost model's choice per (T,
    S)); cache_size: compiled (T, S) plans kept; parameters: initial values (name -> array; on
    CUDA device arrays are used in place, so a caller such as rnngraph.torch can own the
    memory; on the CPU so are C-contiguous NumPy arrays of ``dtype``); options, tuning: the
    schedule options and the loop kernels' code shape, as for :func:`rnngraph.compile` (None:
    the defaults for each S with RNNGRAPH_LOOP's keys); precision: "fp32" (default), "tf32" or
    "bf16", as for :func:`rnngraph.compile` (the once-per-window GEMMs on tensor cores, and by
    default the loops' products where S x K >= 49,152 or S >= 16 with K >= 1,024:
    rnngraph/schedule_options.py ``loop_tensor_cores_by_default``; the CPU emulates it). Raises TypeError /
    GraphError for a network that is not a loss-free
    rg.Sequential, TypeError for options / tuning of another type, ValueError for bad options
    (a bad RNNGRAPH_LOOP included, naming it) or a bad precision (naming it), RuntimeError when
    CUDA is asked for but absent or tf32/bf16 on a GPU without tensor cores (naming the GPU).
    """
    from .devices import resolve_device
    device = resolve_device(device)
    return CompiledRNN(net, device, dtype, seed, plan, cache_size, parameters, options, tuning, precision)
