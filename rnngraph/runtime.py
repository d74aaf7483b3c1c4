"""``rg.compile``: a network -> a TrainingStep that trains it window by window.

A TrainingStep owns the parameters, the states of S streams (carried from one window to the
next: truncated BPTT), the optimizer and the schedule. ``device="cpu"`` runs the NumPy
backend; ``device="cuda"`` the generated GPU kernels (where built); ``"auto"`` picks CUDA
when a GPU and the code generator are available, else the CPU.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .errors import GraphError, positive_int
from .masks import mask_inputs
from .network import Sequential
from .optim import Adam, Optimizer
from .executor import ScheduleExecutor
from .lsh_head import LSHSoftmax
from .lsh_train import lsh_training
from .codegen.tuning import LoopTuning
from .loop_env import from_environment, resolve
from .passes import schedule as build_schedule
from .passes.recurrence import recurrent_width
from .precision import check_gpu, check_precision
from .reference import dtype_name, init_params, zero_states
from .schedule import Schedule
from .step_cuda import cuda_backend, cuda_forward, cuda_train
from .step_feed import StepFeed
from .step_host import host_forward, host_train
from .step_outcome import TrainingOutcome
from .step_forward import StepForward, value_names
from .step_state import StepState
from .schedule_options import ScheduleOptions
from .devices import resolve_device


class TrainingStep(StepFeed, StepState, TrainingOutcome):
    """One compiled network with its parameters, states and optimizer.

    window T and streams S are the shape it is compiled for first; a call with inputs of
    another (T, S) compiles that shape on first use and keeps it (the ``cache_size`` most
    recently used shapes; parameters and optimizer state are shared), so a last partial window
    or another evaluation batch just work; ``window``, ``streams`` and ``schedule`` then
    describe the latest call's shape. States carry across calls of the same S; a call with
    another S continues from the states the last call with that S left (zeros at first).

    Inputs (T, S) token ids or (T, S, I) floats; targets as the loss head takes them
    (rnngraph.heads): (T, S) class ids (SoftmaxCrossEntropy), (T, S, n) floats (MSE), (S,)
    labels (SequenceClassifier). Create it with :func:`compile`. ``parameters`` (name ->
    array) and ``state`` (name -> (depth, S, n)) read as NumPy arrays; on the CPU backend
    ``parameters`` is the live dict, on CUDA a copy: change parameters with
    :meth:`set_parameters` and states by assigning ``step.state = {...}``.

    Dropout (``rg.Dropout`` layers; their masks are graph inputs, see :func:`mask_inputs`):
    :meth:`train` feeds fresh inverted-dropout masks, shape (T, S, width) in the step's dtype,
    each element 0 with probability p and 1/(1-p) otherwise (PyTorch's convention); mask k of
    the training call made after ``optimizer.steps`` earlier ones is drawn from
    ``mask_seed(seed, optimizer.steps, k)``, so it depends only on the compile ``seed`` and the
    step count a checkpoint saves with the optimizer: a resumed run draws what an uninterrupted
    one would. The CPU backend and the CUDA simulator draw them with NumPy (identical masks);
    on a GPU with CuPy they are drawn on the device (cuRAND Philox, same seeds, other values),
    unless the environment variable ``RNNGRAPH_MASKS=host`` asks for NumPy's (copied in: the
    CPU backend's masks exactly, at the cost of a host-to-device copy per call).
    :meth:`forward` (evaluation, sampling) feeds masks of ones: no dropout, like
    ``model.eval()`` in PyTorch.

    ``options`` / ``tuning`` (see :func:`compile`) serve every (T, S); where one is None, each S
    gets the defaults for that S with the keys of ``RNNGRAPH_LOOP`` as it was when the step was
    created (rnngraph/loop_env.py).
    """

    def __init__(self, net: Sequential, window: int, streams: int, device: str, dtype: str,
                 optimizer: Optimizer | None, clip_norm: float | None, seed: int, plan: str | None = None,
                 cache_size: int = 8, nonfinite: str = "raise", options: ScheduleOptions | None = None,
                 tuning: LoopTuning | None = None, backward: bool = True, precision: str = "fp32"):
        self.net, self.graph = net, net.graph
        self.backward = bool(backward)
        if not self.backward:  # nothing would use them: refused rather than ignored
            for name, value in (("optimizer", optimizer), ("clip_norm", clip_norm)):
                if value is not None:
                    got = type(value).__name__ if name == "optimizer" else repr(value)
                    raise ValueError(f"rg.compile(..., backward=False): an evaluation-only step never trains, so "
                                     f"it takes no {name} (got {got}); leave {name} out")
        self.window = positive_int(window, "window")
        self.streams = positive_int(streams, "streams")
        dtype = dtype_name(dtype)
        if clip_norm is not None and not clip_norm > 0:
            raise ValueError(f"clip_norm must be positive or None, got {clip_norm!r}")
        self.dtype, self.clip_norm, self.device = dtype, clip_norm, device
        self.precision = check_precision(precision, dtype)
        if optimizer is not None and not isinstance(optimizer, Optimizer):
            raise TypeError(f"optimizer must be an rg.Adam, rg.AdamW or rg.SGD instance, got {optimizer!r}")
        self.optimizer = optimizer if optimizer is not None else Adam()
        self.plan, self.cache_size = plan, positive_int(cache_size, "cache_size")
        if nonfinite not in ("raise", "skip"):
            raise ValueError(f"nonfinite must be 'raise' or 'skip', got {nonfinite!r}")
        self.nonfinite, self.skipped_steps = nonfinite, 0
        self._carried_nonfinite = False  # the states hold a NaN or inf (rnngraph/step_state.py)
        # an rg.LSHSoftmax head's index and sparse training loss (rnngraph/lsh_train.py), if it trains
        self._lsh = (lsh_training(net.head, self.graph, device) if isinstance(net.head, LSHSoftmax) and self.backward
                     else None)
        self._given = (options, tuning)
        self._loop_env = from_environment()  # RNNGRAPH_LOOP, once: a bad value fails here, named
        self._recurrent_width = recurrent_width(self.graph)  # K, for the options' defaults
        options, tuning = resolve(self.streams, options, tuning, self._loop_env, self._recurrent_width, self.precision)
        self.schedule: Schedule = self._build(self.graph, self.window, self.streams, options)
        params = init_params(self.graph, seed, dtype)
        self.seed = seed
        self.dropout: dict[str, float] = mask_inputs(self.graph)  # mask input -> p
        self._ones: dict[str, np.ndarray] | None = None  # the masks forward() feeds (CPU)
        self.last_grad_norm: float | None = None
        if device == "cuda":
            if dtype != "float32":
                raise ValueError("the CUDA backend runs float32")
            check_gpu(self.precision)  # tf32 / bf16 need tensor cores: the GPU named otherwise
            self._cuda = cuda_backend(self, self.schedule, params, tuning)
        else:
            self._cuda = None
            self._params = params
            self._state = zero_states(self.graph, self.streams, dtype)
            self._executor = ScheduleExecutor(self.schedule, dtype)
        # (T, S) -> (schedule, CUDA backend or NumPy executor): the shapes compiled so far, most
        # recently used last; the first backend's parameters and optimizer slots are everyone's
        # a plan of the variable-length graph is keyed (T, S, "lengths") (rnngraph/step_lengths.py)
        self._plans = OrderedDict({(self.window, self.streams): (self.schedule, self._cuda or self._executor)})
        self._masked, self._columns = False, None  # the latest call's: lengths?, its loss's column count
        self._first_cuda = self._cuda
        self._states_by_streams: dict[int, dict] = {}  # S -> the states of the last call with S streams
        # data parallelism (rnngraph/distributed.py): the gradient all-reduce, and this process's
        # streams (lo, hi) of the global S its dropout masks are cut from; None in one process
        self.gradient_reducer = None
        self.stream_shard: tuple[int, int, int] | None = None

    def _build(self, graph, T: int, S: int, options: ScheduleOptions) -> Schedule:
        """The schedule of ``graph`` for (T, S); an evaluation-only step's has no backward steps
        (what it compiles, and what ``step.schedule`` shows)."""
        sched = build_schedule(graph, T, S, self.dtype, self.plan, options, precision=self.precision)
        return sched if self.backward else sched.forward_only()

    def _use(self, T: int, S: int, masked: bool = False) -> None:
        """Make (T, S) the current shape, compiling it on first use (an LRU cache of
        ``cache_size`` shapes). The states carry when S stays; another S continues from the states
        its last call left (zeros the first time: they are other sequences), so evaluating a batch
        of another size between training windows loses nothing. ``masked``: the plan of the
        network's variable-length graph, kept apart from the plain one of (T, S)."""
        key = (T, S, "lengths") if masked else (T, S)
        if (T, S, masked) == (self.window, self.streams, self._masked):
            return
        self._states_by_streams[self.streams] = self.state  # back when this S returns
        state = self._states_by_streams.pop(S, None)
        if key in self._plans:
            self._plans.move_to_end(key)
            sched, backend = self._plans[key]
        else:
            options, tuning = resolve(S, *self._given, self._loop_env, self._recurrent_width, self.precision)
            graph = self.net.masked_graph if masked else self.graph
            sched = self._build(graph, T, S, options)
            if self._cuda:
                backend = cuda_backend(self, sched, None, tuning, share=self._first_cuda)
            else:
                backend = ScheduleExecutor(sched, self.dtype)
            self._plans[key] = (sched, backend)
            while len(self._plans) > self.cache_size:
                self._plans.popitem(last=False)
        self.window, self.streams, self.schedule, self._ones, self._masked = T, S, sched, None, masked
        if self._cuda:
            self._cuda = backend
            backend.own_optimizer_hooks()  # a checkpoint saves and loads through the current shape's
            backend.buf.refresh_transposed(backend.stream)  # the weights may have changed since it last ran
        else:
            self._executor = backend
        if state is not None:
            self.state = state
        else:
            self.reset_state()

    @property
    def kernels(self) -> str:
        """The generated CUDA source (empty on the CPU backend)."""
        return self._cuda.program.source if self._cuda else ""

    # ------------------------------------------------------------------ running
    def forward(self, inputs, targets=None, carry: bool = True, all_values: bool = False,
                lengths=None) -> StepForward:
        """Run one window without training and without dropout (masks of ones). Returns a
        :class:`rnngraph.StepForward`, the same fields, keys, shapes and dtypes on both backends:
        ``outputs`` (name -> (T, S, n)), ``values`` (the outputs, and the loss node's per-column
        losses (T, S, 1) when targets are given; with ``all_values=True`` every node an op
        computes, e.g. ``"layer0.c_next"``), ``loss`` (the mean loss when targets are given, else
        None), ``states`` and ``final_states`` (name -> (depth, S, n), before and after the
        window). With ``carry`` the final states become the next window's initial states.
        ``all_values=True`` on CUDA runs a second program whose kernels also store the values the
        usual ones keep in registers (compiled on first use per (T, S), like the step's own
        program; each call then writes every node's (T, S, n) and copies it to the host). Targets as for
        :meth:`train`; ShapeError naming ``targets`` or the input for a wrong shape or dtype.
        lengths: as for :meth:`train` (outputs past a length: zero for the cells', the head's
        of a zero input; ``all_values`` then names the variable-length graph's nodes:
        rnngraph/step_lengths.py)."""
        feed = self._feed(inputs, targets, lengths)
        with_loss = self.graph.loss is not None and targets is not None
        names = value_names(self.net.masked_graph if self._masked else self.graph, all_values, with_loss)
        run = cuda_forward if self._cuda else host_forward
        result = run(self, feed, names, carry, all_values, with_loss)
        if carry:  # a NaN or inf carried on is named by the next training call it makes not finite
            self._note_carried(result.final_states)
        return result

    def train(self, inputs, targets, lengths=None) -> float:
        """Forward, BPTT through the window, clip, optimizer update; states carry. Returns the
        window's mean loss (see the head: nats per target for the softmax heads, the mean squared
        error for MSE), with dropout applied where the network has ``rg.Dropout`` layers. On the
        CUDA backend the loss is an :class:`rnngraph.lazy_loss.LazyLoss`: the call returns once
        the step is enqueued, and the value (a float-like: ``float(loss)``, ``loss.item()``,
        formatting, arithmetic) waits for the GPU when first read; a window whose loss or
        gradients are not finite raises FloatingPointError (``nonfinite="raise"``) then, or at the
        step's next use (``parameters``, ``state``, ``forward``, ``last_grad_norm``,
        ``skipped_steps``, or the second ``train`` after it: without an LSH head, data
        parallelism, or dropout in skip mode the next call is enqueued behind an unsettled one,
        and when that one fails it changes nothing and its loss raises ``rg.NotApplied``),
        whichever comes first.

        targets: what the head takes (rnngraph.heads): class ids (T, S) for
        SoftmaxCrossEntropy, floats (T, S, n) for MSE, labels (S,) for SequenceClassifier.
        lengths: None, or the valid steps of each stream, (S,) integers in [0, T] (host data, any
        order): each stream's state stops at its last valid step (the state carried into the
        next window is the state at its length), and the padded steps add nothing to the loss
        or the gradient: a SequenceClassifier's label sits at each stream's last valid step (a
        stream of length 0 is not counted), the softmax heads' mean is over the valid columns,
        MSE's over the valid elements (rnngraph/step_lengths.py); lengths all equal to T run
        the plain graph. ShapeError / TypeError / ValueError naming ``lengths`` for a wrong
        shape, dtype or value. Raises GraphError when the network has no loss head, ValueError when targets are None,
        ShapeError naming ``targets`` (or the input) for a wrong shape, dtype or id."""
        head = self.net.head
        if head is None:
            raise GraphError("this network has no loss head: end it with rg.SoftmaxCrossEntropy(vocab), rg.MSE() "
                             "or rg.SequenceClassifier(classes)")
        if targets is None:
            raise ValueError(f"train needs targets: {head.targets_doc}")
        if not self.backward:
            raise RuntimeError("this step was compiled for evaluation only (rg.compile(..., backward=False)): "
                               "it has no backward to train with")
        feed = self._feed(inputs, targets, lengths)
        return cuda_train(self, feed) if self._cuda else host_train(self, feed)


def compile(net: Sequential, window: int, streams: int, device: str = "auto", dtype: str = "float32",
            optimizer: Optimizer | None = None, clip_norm: float | None = None, seed: int = 0,
            plan: str | None = None, cache_size: int = 8, nonfinite: str = "raise",
            options: ScheduleOptions | None = None, tuning: LoopTuning | None = None,
            backward: bool = True, precision: str = "fp32") -> TrainingStep:
    """Compile ``net`` for windows of ``window`` timesteps over ``streams`` parallel streams.

    device: ``"cpu"`` (NumPy backend), ``"cuda"`` or ``"auto"``; dtype ``"float32"``/``"float64"`` (or the NumPy type);
    optimizer default Adam(lr=1e-3); clip_norm: global gradient-norm clip (None = off);
    seed: parameter initialisation seed, and the seed of the dropout masks (see
    :class:`TrainingStep`); plan: force "wavefront" or "scc-sequential" (default:
    the cost model's choice; ``step.schedule`` shows it), or "naive" (one kernel per op per
    timestep: the baseline, for benchmarks); cache_size: how many (T, S) shapes of calls are kept
    compiled (see :class:`TrainingStep`); nonfinite: what :meth:`TrainingStep.train` does when
    the loss or the gradients are not finite, after leaving parameters, optimizer state and
    states unchanged: ``"raise"`` FloatingPointError (default) or ``"skip"`` (count it in
    ``step.skipped_steps``, as mixed-precision loss scalers skip); options: an
    ``rg.ScheduleOptions``, what the passes decide beyond the graph (persistent layer norms, the
    flagged exchange, post-loop gradient sums); tuning: an ``rg.LoopTuning``, the GPU loop
    kernels' code shape; each used for every (T, S) as given, or when None the defaults for
    each S (``ScheduleOptions.defaults(S, K, precision)``, K the widest recurrent product's inner
    dimension; ``LoopTuning.defaults(S)``) overridden by the keys
    of the ``RNNGRAPH_LOOP`` environment variable, read once, here; backward: False for a step
    that only evaluates (``forward``; the GPU generates and compiles no backward kernel, the
    schedule has no backward steps, and ``train`` raises RuntimeError), as
    ``rnngraph.lm.Evaluator`` makes; it takes no optimizer or clip_norm; precision: ``"fp32"``
    (default: strict fp32 everywhere), ``"tf32"`` or ``"bf16"``: the once-per-window GEMMs
    (hoisted products, input-gradient products of the phases, weight gradients) on tensor cores
    with operands in that format and fp32 accumulation, everything else fp32 (rnngraph/precision.py;
    the loops' recurrent products too with ``options.loop_tensor_cores``, by default where
    S x K >= 49,152 or S >= 16 with K >= 1,024, measured faster there and slower below:
    rnngraph/schedule_options.py ``loop_tensor_cores_by_default``); float32 only; the CPU backend
    emulates it (operands rounded to the format, ties to even). A network with an
    ``rg.LSHSoftmax`` head trains sparsely and evaluates densely on either backend (``"auto"``
    picks CUDA where there is a GPU, as for any head; rnngraph/codegen/lsh_step.py). Returns a
    :class:`TrainingStep`. Raises TypeError for an optimizer that is
    not an rg.Adam/rg.AdamW/rg.SGD instance, or options / tuning of another type, and ValueError
    for non-positive window/streams, an unknown device or dtype, a bad RNNGRAPH_LOOP (naming it),
    an optimizer or clip_norm with backward=False (naming it), a precision other than fp32/tf32/bf16
    or a reduced one with dtype float64; RuntimeError when CUDA is asked for but unavailable, or
    for tf32/bf16 on a GPU without tensor cores (compute capability below 8.0, naming the GPU).
    """
    if not isinstance(net, Sequential):
        raise TypeError(f"rg.compile expects an rg.Sequential, got {type(net).__name__}")
    if not isinstance(backward, bool):
        raise TypeError(f"rg.compile: backward must be True or False, got {backward!r}")
    return TrainingStep(net, window, streams, resolve_device(device), dtype, optimizer, clip_norm, seed, plan,
                        cache_size, nonfinite, options, tuning, backward, precision)
