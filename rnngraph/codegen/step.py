"""The CUDA backend of a TrainingStep: one window's forward, BPTT, clipping and optimizer update
on the device, states carried in the history rows of the state buffers.

A ``train`` call is the inputs copied in (device to device for device arrays), the step's
scalars copied in (``1/columns``, the optimizer's step size and bias correction: four floats
from pinned memory), one CUDA graph replayed -- forward, zeroing, BPTT, the finite check,
clipping, the optimizer update, the transposed weights, the states carried (only after a finite
step) -- and the loss column and two sums of squares copied out. The graph is captured from the
second call on (codegen/graphs.py's Replay; the first launches directly, compiling the kernels);
before, each of those launches cost the host 20 to 150 us, most of a small step's time
(H200, char LM 1 x 512 at S = 1: 2.6 ms a step, the GPU busy for 0.9 ms of it,
bench/results/h200-20261202-lm-step-trace-before-step-graph.json).

Dropout masks (graph inputs ``dropK.mask``, see :class:`rnngraph.network.Dropout`) are written
straight into their input buffers: :meth:`CudaBackend.train_masks` draws them on the device
where CuPy is usable (cuRAND's Philox generator through CuPy's bindings, on the step's numba
stream, so the kernels that read them are ordered after it: no host copy, no sync), else with
NumPy on the host (the simulator: the CPU backend's masks exactly) and copies them in;
:meth:`CudaBackend.ones_masks` fills them with ones for evaluation, once until the next
training call.
"""
from __future__ import annotations

import os
import warnings
from contextlib import nullcontext

import numpy as np
from numba import cuda

from ..optim import SGD, Adam, AdamW, Optimizer
from ..lazy_loss import LazyLoss, NotApplied
from ..masks import draw_mask, mask_inputs, mask_seed
from ..schedule import Schedule
from ..reference import mean_loss
from . import library
from .buffers import arena
from .device import as_device, have_cupy, stream_handle
from .graphs import Replay
from .host_copies import Staging
from .program import CudaProgram, every_value_written
from .unsettled_calls import Call, UnsettledCalls
from .tuning import LoopTuning


def masks_on_host() -> bool:
    """Whether ``RNNGRAPH_MASKS`` asks for the training masks to be drawn on the host: ``host``
    (NumPy, the CPU backend's masks exactly) -> True; unset, empty or ``device`` (cuRAND where
    CuPy has it) -> False. ValueError naming the variable for anything else."""
    value = os.environ.get("RNNGRAPH_MASKS", "").strip().lower()
    if value not in ("", "device", "host"):
        raise ValueError(f"RNNGRAPH_MASKS={value!r}: expected 'host' or 'device'")
    return value == "host"


def _cupy_stream(cupy, stream):
    """``stream`` (numba's) as a CuPy stream object, without a copy of the CUDA stream: through
    the ``__cuda_stream__`` protocol where this CuPy has ``Stream.from_external`` (CuPy 14
    deprecates ``ExternalStream``), else ``ExternalStream`` over the raw handle."""
    from_external = getattr(cupy.cuda.Stream, "from_external", None)
    if from_external is not None and hasattr(stream, "__cuda_stream__"):
        return from_external(stream)
    return cupy.cuda.ExternalStream(stream_handle(stream))


#: step scalars: 1/columns, the optimizer's three, the finite check's chain flag
STEP_SCALARS = 5


class CudaBackend:
    """Runs ``schedule`` on the GPU with ``optimizer`` (Adam or SGD) and optional ``clip_norm``.
    ``share``: the backend of another (T, S) of the same TrainingStep, whose stream, parameters
    and optimizer slots this one uses (``params`` is then ignored); ``tuning``: the loop kernels'
    code shape (codegen/tuning.py; None: the defaults for the schedule's S); ``backward=False``:
    forward only, no backward kernel generated or compiled (``train`` then raises RuntimeError)."""

    def __init__(self, schedule: Schedule, params: dict[str, np.ndarray] | None, optimizer: Optimizer,
                 clip_norm: float | None, dropout_seed: int = 0, share: "CudaBackend | None" = None,
                 tuning: LoopTuning | None = None, backward: bool = True):
        if not isinstance(optimizer, (SGD, Adam)):
            raise TypeError(f"the CUDA backend runs SGD and Adam, not {type(optimizer).__name__}")
        self.schedule, self.g = schedule, schedule.graph
        self._unsettled = UnsettledCalls(optimizer)  # the last training calls until settled (see train)
        self._calls = 0  # training calls enqueued: their parity picks the staging buffers of results
        self._loss_column = None  # the loss node's (T*S,) window, made at the first training call
        self.T, self.S = schedule.window, schedule.streams
        self.program = CudaProgram(schedule, stream=share.stream if share else None,
                                   params=share.buf.P if share else None, tuning=tuning, backward=backward)
        self.stream = self.program.stream
        self.buf = self.program.buf
        self.optimizer, self.clip_norm = optimizer, clip_norm
        if share is not None:  # another (T, S) of the same step: its parameters and optimizer slots
            self.slots, self.param_arena, self.slot_arenas = share.slots, share.param_arena, share.slot_arenas
            self.buf.refresh_transposed(self.stream)
        else:
            # parameters, their gradients and the two optimizer slots in four arenas of one layout:
            # the update and the clip are one launch each over all parameters (as PyTorch's foreach
            # optimizers), element for element the same arithmetic as a launch per parameter
            self.param_arena = self.buf.param_arena
            shapes = {name: p.shape for name, p in self.buf.P.items()}
            views = [{}, {}]
            self.slot_arenas = [arena(v, shapes, self.stream) for v in views]
            for a in self.slot_arenas:
                library.fill(a, 0.0, stream=self.stream)
            self.slots = {name: [views[0][name], views[1][name]] for name in shapes}
            self.set_parameters(params)
        self.reset_state()
        self._sums = cuda.device_array(2, np.float32, stream=self.stream)  # gradients', losses' squares
        self._ok = cuda.device_array(1, np.int32, stream=self.stream)  # 1: both finite (see train)
        # the step's scalars: 1/columns, the optimizer's three, the finite check's chain flag (see
        # train); the host writes two rows before each replay, for the previous call finite or not,
        # and the finite check copies the one that holds into _hyper before the update reads it
        self._hyper = cuda.to_device(np.zeros(STEP_SCALARS, np.float32), stream=self.stream)
        self._hyper_rows = cuda.to_device(np.zeros((2, STEP_SCALARS), np.float32), stream=self.stream)
        self._staging = Staging(self.stream)  # pinned buffers: inputs, step scalars, loss and sums out
        self._carry_scratch = {s.name: cuda.device_array_like(self.buf.V[s.node][:s.depth], stream=self.stream)
                               for s in self.g.states if self.T < s.depth}  # source and destination overlap
        self._step_graph = Replay(self._step_launches, self.stream, "training step",
                                  enabled=self.program.replay and not self.program.sim)
        self.gradient_reducer = None  # data parallelism: see set_gradient_reducer and train_masks
        self.mask_shard = share.mask_shard if share is not None else None
        if share is not None and share.gradient_reducer is not None:
            self.set_gradient_reducer(share.gradient_reducer)
        self.last_finite, self.last_grad_norm = True, None
        self.own_optimizer_hooks()
        self.dropout, self.dropout_seed = mask_inputs(self.g), dropout_seed
        if self.dropout:
            masks_on_host()  # a bad RNNGRAPH_MASKS fails at compile time, named
        self._masks_are_ones = False
        self._curand = None  # see _device_rng: None until first asked, then a tuple or False
        self._every: CudaProgram | None = None  # the program storing every node (see forward)
        self.lsh = None  # an rg.LSHSoftmax head's sparse training loss (codegen/lsh_step.py), set by its step

    def own_optimizer_hooks(self) -> None:
        """Point the optimizer's save, load and settle hooks at this backend (the one of the
        step's current (T, S): only it may have unsettled calls)."""
        opt = self.optimizer
        opt.on_save, opt.on_load, opt.on_settle = self._pull_slots, self._push_slots, self.settle

    def _slot_names(self, name: str) -> list[str]:
        return [f"m/{name}", f"v/{name}"] if isinstance(self.optimizer, Adam) else [f"momentum/{name}"]

    def _pull_slots(self) -> None:
        """Device optimizer slots -> ``optimizer.slots`` (for checkpoints)."""
        self.settle()
        for name, arrays in self.slots.items():
            for key, arr in zip(self._slot_names(name), arrays):
                self.optimizer.slots[key] = arr.copy_to_host(stream=self.stream)
        self.stream.synchronize()

    def _push_slots(self) -> None:
        """``optimizer.slots`` -> device (after a checkpoint is loaded); missing slots are zero."""
        self.settle()
        for name, arrays in self.slots.items():
            for key, arr in zip(self._slot_names(name), arrays):
                value = self.optimizer.slots.get(key)
                if value is None:
                    library.fill(arr, 0.0, stream=self.stream)
                else:
                    arr.copy_to_device(np.ascontiguousarray(value, np.float32), stream=self.stream)

    # ------------------------------------------------------------------ parameters and states
    def set_parameters(self, params: dict[str, np.ndarray]) -> None:
        self.settle()
        for name, value in params.items():
            self.buf.P[name].copy_to_device(np.ascontiguousarray(value, np.float32), stream=self.stream)
        self.buf.refresh_transposed(self.stream)

    def parameters(self) -> dict[str, np.ndarray]:
        self.settle()
        out = {name: arr.copy_to_host(stream=self.stream) for name, arr in self.buf.P.items()}
        self.stream.synchronize()
        return out

    def get_state(self) -> dict[str, np.ndarray]:
        self.settle()
        out = self._state_rows(final=False)
        self.stream.synchronize()
        return out

    def _state_rows(self, final: bool) -> dict[str, np.ndarray]:
        """State name -> (depth, S, n) host copy (queued on the stream: synchronise before use) of
        the history rows (the window's initial states) or, with ``final``, of the window's last
        ``depth`` rows (its final states, which :meth:`_carry` makes the next history)."""
        start = self.T if final else 0
        return {s.name: self.buf.V[s.node][start:start + s.depth].copy_to_host(stream=self.stream)
                for s in self.g.states}

    def set_state(self, states: dict[str, np.ndarray]) -> None:
        self.settle()
        for s in self.g.states:
            if s.name in states:
                self.buf.V[s.node][:s.depth].copy_to_device(np.ascontiguousarray(states[s.name], np.float32),
                                                            stream=self.stream)

    def set_stream_order(self, order: np.ndarray, valid_streams: np.ndarray) -> None:
        """The loops' stream order and valid streams for the next call of the variable-length
        graph (Buffers.set_stream_order), copied through the step's pinned staging buffers."""
        self.buf.set_stream_order(order, valid_streams, self._staging)

    def reset_state(self) -> None:
        self.settle()
        for s in self.g.states:
            library.fill(self.buf.V[s.node][:s.depth], 0.0, stream=self.stream)

    def _carry(self, if_finite: bool = False) -> None:
        """The last ``depth`` rows of each state buffer become the next window's history; with
        ``if_finite`` only where the device's finite flag (``_ok``) is set, decided on the device."""
        for s in self.g.states:
            v = self.buf.V[s.node]
            tail, head = v[self.T:self.T + s.depth], v[:s.depth]
            if self.T < s.depth:  # source and destination overlap: through a scratch copy
                tmp = self._carry_scratch[s.name]
                tmp.copy_to_device(tail, stream=self.stream)
                tail = tmp
            if if_finite:
                library.copy_if(head, tail, self._ok, stream=self.stream)
            else:
                head.copy_to_device(tail, stream=self.stream)

    # ------------------------------------------------------------------ dropout masks
    def ones_masks(self) -> None:
        """Every dropout mask buffer = 1 (no dropout: evaluation), unless it already is."""
        self.settle()
        if not self._masks_are_ones:
            for m in self.dropout:
                library.fill(self.buf.V[m], 1.0, stream=self.stream)
            self._masks_are_ones = True

    def train_masks(self, step: int, keep_last: bool = False) -> None:
        """Draw the masks of the training call that follows ``step`` earlier ones into their
        buffers (see the module docstring); mask k's seed is ``mask_seed(dropout_seed, step, k)``.
        With ``mask_shard = (lo, hi, total)`` (data parallelism: this process's streams of the
        global S) the masks are the host's masks of the global batch, streams [lo, hi).
        ``keep_last``: the last training call may still run (see :meth:`train`'s overlap): the
        masks are written in stream order, after it has read its own."""
        self.settle(keep_last=keep_last)
        self._masks_are_ones = False
        shard = self.mask_shard if self.mask_shard and self.mask_shard[1] - self.mask_shard[0] == self.S else None
        for k, (m, p) in enumerate(self.dropout.items()):
            dst, seed = self.buf.V[m], mask_seed(self.dropout_seed, step, k)  # (T, S, width)
            if shard is not None:  # this process's streams of the global batch's host masks
                lo, hi, total = shard
                mask = draw_mask(p, (self.T, total, self.g.by_name[m].size), seed, np.float32)[:, lo:hi]
                dst.copy_to_device(np.ascontiguousarray(mask), stream=self.stream)
            elif self._device_rng() is not None:
                self._device_mask(dst, p, seed)
            else:
                shape = (self.T, self.S, self.g.by_name[m].size)
                dst.copy_to_device(draw_mask(p, shape, seed, np.float32), stream=self.stream)

    def _device_rng(self):
        """(CuPy's curand module, a Philox4x32-10 generator, the numba stream as a CuPy stream),
        made once; None where CuPy is not usable (the simulator, no CuPy) or cuRAND fails to
        load, which warns once, or where ``RNNGRAPH_MASKS=host`` asks for the host's masks
        (NumPy's, identical to the CPU backend's): the masks then come from the host."""
        if self._curand is None:
            self._curand = False
            if masks_on_host():
                return None  # the CPU backend's masks, bit for bit (comparisons across backends)
            if have_cupy():
                try:
                    import cupy
                    try:
                        from cupy.cuda import curand
                    except ImportError:
                        from cupy_backends.cuda.libs import curand
                    gen = curand.createGenerator(curand.CURAND_RNG_PSEUDO_PHILOX4_32_10)
                    self._curand = (curand, gen, _cupy_stream(cupy, self.stream))
                except Exception as exc:  # no libcurand for this CuPy, or another CUDA
                    warnings.warn(f"dropout masks from the host: cuRAND through CuPy failed ({type(exc).__name__}: "
                                  f"{exc})", RuntimeWarning, stacklevel=3)
        return self._curand or None

    def _device_mask(self, dst, p: float, seed: np.random.SeedSequence) -> None:
        """Uniforms in (0, 1] from cuRAND (Philox4x32-10 seeded with 64 bits of ``seed``, offset 0)
        into ``dst``, then in place 1/(1-p) where u > p, else 0: all on the numba stream, so the
        step's kernels read them after they are written."""
        curand, gen, stream = self._curand
        flat = dst.reshape(dst.size)
        curand.setPseudoRandomGeneratorSeed(gen, int(seed.generate_state(1, np.uint64)[0]))
        curand.setGeneratorOffset(gen, 0)
        with stream:  # CuPy's curand wrappers set the generator's stream to CuPy's current stream
            curand.generateUniform(gen, int(flat.__cuda_array_interface__["data"][0]), flat.size)
        library.dropout_threshold(flat, p, stream=self.stream)

    def __del__(self):
        rng = getattr(self, "_curand", None)
        if rng:
            try:
                rng[0].destroyGenerator(rng[1])
            except Exception:  # interpreter shutdown
                pass

    # ------------------------------------------------------------------ running
    def feed(self, inputs: dict) -> None:
        """Enqueue the copies of a call's graph inputs (name -> host or device array) into their
        buffers on the step's stream. A training call's may come before the previous call is
        settled (rnngraph/step_cuda.py): stream order puts them after its kernels, and the GPU
        then has them as soon as that call ends instead of after the host's settling."""
        self._feed(inputs)

    def _feed(self, inputs: dict) -> None:
        for n in self.g.inputs:
            if n.name not in inputs:
                continue
            x = inputs[n.name]
            dst = self.buf.V[n.name]
            if hasattr(x, "__cuda_array_interface__"):
                src = as_device(x, self.stream)
                dst.copy_to_device(src if n.dtype == "index" else src.reshape(dst.shape), stream=self.stream)
            else:
                self._staging.to_device(n.name, dst, x)

    def forward(self, inputs: dict, names, carry: bool = True, every_value: bool = False) -> tuple[dict, dict, dict]:
        """Run one window; returns host arrays (values, states, final_states): node name -> (T, S, n)
        for each of ``names``, and state name -> (depth, S, n) before and after the window. The
        generated kernels keep most pointwise intermediates in registers: with ``every_value`` a
        second program whose kernels store every node (compiled on first use, run on the same
        buffers) runs instead; ``names`` must be nodes the program run writes."""
        self.settle()
        self._feed(inputs)
        states = self._state_rows(final=False)
        if every_value:
            if self._every is None:
                # its loops do every item (skip=0): a padded step's values then equal the NumPy backend's
                self._every = CudaProgram(every_value_written(self.schedule), stream=self.stream, backward=False,
                                          buffers=self.buf, tuning=self.program.tuning.replace(skip=0))
                self.buf.refresh_transposed(self.stream)  # any transposed weight it added
            self._every.run_forward()
        else:
            self.program.run_forward()
        values = {name: self.buf.window(name).copy_to_host(stream=self.stream).reshape(self.T, self.S, -1)
                  for name in names}
        final = self._state_rows(final=True)
        self.stream.synchronize()
        if carry:
            self._carry()
        return values, states, final

    def train(self, inputs: dict | None, columns: int | None = None, on_finish=None, overlap: bool = False,
              chain: bool = False) -> LazyLoss:
        """Forward, BPTT, clip, update, enqueued (``inputs`` None: :meth:`feed` gave them); returns
        the window's mean loss as a :class:`rnngraph.lazy_loss.LazyLoss` (read when needed: the
        host does not wait for the GPU here), the loss node's sum over the window divided by ``columns`` (default T*S; the
        count of targets not ignored: rnngraph.reference.loss_columns), which also seeds the loss
        gradient with 1/columns (0 when no column counts). When the loss or a gradient is not
        finite (checked on the device, the update kernels read the flag) nothing changes:
        parameters, optimizer slots, the states, and -- once the call is settled -- the step count;
        ``last_finite`` says which happened, ``last_grad_norm`` is the gradients' global norm
        before clipping (both set when the call is settled: its loss read, or :meth:`settle`).
        ``on_finish(loss, finite, grad_norm)``, if given, makes the loss's value (it may raise).

        The previous call is settled first, unless ``overlap``: then it may still run (its
        outcome unseen), and this call is enqueued behind it, so the host's work for this call
        overlaps the GPU's for that one; the one before it is settled. The step count that
        Adam's bias correction (or SGD's first step) reads depends on whether the previous call
        counts: the host writes both rows of step scalars and the finite check keeps the one
        the previous call's finite flag picks (before the update reads it). With ``chain`` (``nonfinite="raise"``)
        the finite check also fails when the previous call's did, so a call enqueued behind a
        failed one changes nothing; when that one is settled, this one is marked not applied
        (its loss raises :class:`rnngraph.lazy_loss.NotApplied` when read) and does not count."""
        self.settle(keep_last=overlap)
        prev, prev_call = self._unsettled.previous(overlap)
        columns = self.T * self.S if columns is None else columns
        opt = self.optimizer
        opt.steps += 1
        if inputs is not None:
            self._feed(inputs)
        reduce = self.gradient_reducer is not None
        rows = np.zeros((2, STEP_SCALARS), np.float32)  # the previous call finite (or settled), not finite
        rows[:, 0] = (1.0 if reduce else 1.0 / columns) if columns else 0.0  # the loss gradient's seed
        rows[0, 1:4] = self._optimizer_scalars(opt.steps)
        rows[1, 1:4] = self._optimizer_scalars(opt.steps - 1) if prev is not None else rows[0, 1:4]
        rows[:, 4] = 1.0 if prev is not None and chain else 0.0
        self._staging.to_device("step scalars", self._hyper_rows, rows)
        self._calls += 1
        part = self._calls % 2  # two calls may be unsettled: their results go to two sets of buffers
        if reduce:
            self._staging.to_device("loss sum and columns", self._reduced, np.array([0.0, columns], np.float32))
            self._backward_graph()
            try:
                self.gradient_reducer([self.buf.param_grad_arena, self._reduced], self.stream)
            except BaseException:  # a peer failed: nothing was updated, so the call did not count
                opt.steps -= 1
                raise
            self._update_graph()
            reduced = self._staging.to_host("loss sum and columns", self._reduced)
        else:
            self._step_graph()
        sums = self._staging.to_host(f"sums {part}", self._sums)
        last = f"sums {part}" if reduce else f"loss {part}"
        if self._loss_column is None:  # one view for every call: numba's slicing costs host time
            self._loss_column = self.buf.window(self.g.loss).reshape(self.T * self.S)
        losses = None if reduce else self._staging.to_host(last, self._loss_column)
        call = Call()
        if prev is not None and chain:
            prev_call.next = call

        def finish():
            if prev is not None and not prev.ready:  # calls are settled in order
                try:
                    prev.item()
                except FloatingPointError:  # its own error: raised to whoever settles or reads it
                    pass
            self._staging.wait(last)  # this call's last copy: it has ended (a later one may run)
            if call.cancelled:
                self._unsettled.cancel(call.next)  # chained behind this one: withheld on the device too
                raise NotApplied(f"the training call after step {opt.steps} was not applied: the call enqueued "
                                 f"before it had a non-finite loss or gradient (reading that call's loss raises "
                                 f"its FloatingPointError); this one changed nothing")
            # the window's mean loss: the loss node summed over the window / ``columns`` (with
            # data parallelism: every process's sums over every process's columns)
            if reduce:
                loss = float(reduced[0]) / float(reduced[1]) if reduced[1] else 0.0
            else:
                loss = mean_loss(losses.astype(np.float64), columns)
            self.last_finite = bool(np.isfinite(sums).all())
            self.last_grad_norm = float(np.sqrt(sums[0]))
            if not self.last_finite:  # the kernels updated and carried nothing: the step did not happen
                opt.steps -= 1
                self._unsettled.cancel(call.next)  # chained behind this one: the device withheld it too
            return loss if on_finish is None else on_finish(loss, self.last_finite, self.last_grad_norm)
        loss_out = LazyLoss(finish)
        self._unsettled.add(loss_out, call)
        return loss_out

    def _optimizer_scalars(self, steps: int) -> np.ndarray:
        """The optimizer's three step scalars (SGD's two and a 0) for a call that is step ``steps``."""
        opt, out = self.optimizer, np.zeros(3, np.float32)
        if isinstance(opt, Adam):  # Adam and AdamW: p *= 1 - lr*wd first
            decay = opt.decay_factor() if isinstance(opt, AdamW) else 1.0
            out[:] = library.adam_hyper(opt.lr, opt.betas[0], opt.betas[1], steps, decay)
        else:
            out[:2] = library.sgd_hyper(opt.lr, steps == 1)
        return out

    def set_gradient_reducer(self, reducer) -> None:
        """Make this step one process of data-parallel training (rnngraph/distributed.py).
        ``reducer(arrays, stream)`` all-reduces (sum) the given float32 device arrays in place,
        ordered after the work enqueued on ``stream`` and before what follows. A training call
        then runs in two parts around it: forward and BPTT with the loss gradient seeded 1 (the
        gradients of the loss summed over this process's counted columns), the loss summed into
        ``[loss sum, columns]``; the all-reduce of the gradient arena and of that pair; the
        gradients divided by the global column count on the device (the gradient of the global
        batch's mean loss, as in rnngraph.distributed's CPU path); then the finite check -- of
        the all-reduced gradients and loss sum, so every process decides alike --, clipping, the
        update and the state carry. The call's loss is the global mean."""
        self.gradient_reducer = reducer
        self._reduced = cuda.to_device(np.zeros(2, np.float32), stream=self.stream)  # [loss sum, columns]
        enabled = self.program.replay and not self.program.sim
        self._backward_graph = Replay(self._backward_launches, self.stream, "training step: forward and backward",
                                      enabled=enabled)
        self._update_graph = Replay(self._update_launches, self.stream, "training step: update", enabled=enabled)

    def settle(self, keep_last: bool = False) -> None:
        """Wait for the unsettled training calls and take their results (steps, last_finite,
        ...), once each, in order; raises the first FloatingPointError an ``on_finish`` raises
        (never :class:`rnngraph.lazy_loss.NotApplied`: that call's predecessor raised). With
        ``keep_last`` the last call may stay unsettled (see :meth:`train`'s overlap), unless an
        earlier one raised."""
        self._unsettled.settle(keep_last)

    def _step_launches(self) -> None:
        """Everything a training call launches after its inputs and scalars are in, on the step's
        stream: what the step's CUDA graph holds (so: no host copy, no allocation, no host
        scalar that changes between calls -- those are read from ``_hyper_rows``, the row picked on
        the device into ``_hyper``)."""
        self._backward_launches()
        self._update_launches()

    def _backward_launches(self) -> None:
        """The forward, the zeroed gradients, the loss gradient's seed and BPTT; with a gradient
        reducer also the loss summed into ``_reduced[0]``."""
        b, g, st = self.buf, self.g, self.stream
        with self.lsh.training(self.program) if self.lsh else nullcontext():  # an LSH head: its sparse loss
            self.program.run_forward(direct=True)
            library.fill(b.zeroed_grads, 0.0, stream=st)
            library.fill(b.param_grad_arena, 0.0, stream=st)
            # 1/columns, the same in both rows of step scalars (see train)
            library.fill_from(b.window(g.loss, grad=True), self._hyper_rows[0], 0, stream=st)
            self.program.run_backward(direct=True)
        if self.gradient_reducer is not None:
            library.column_sum(b.window(g.loss).reshape(self.T * self.S, 1), self._reduced[0:1], stream=st)

    def _update_launches(self) -> None:
        """The finite check, clipping, the optimizer update, the transposed weights, the carry;
        with a gradient reducer first the all-reduced gradients divided by the global columns."""
        b, g, st = self.buf, self.g, self.stream
        reduced = self.gradient_reducer is not None
        if reduced:
            library.scale_by_reciprocal(b.param_grad_arena, self._reduced, 1, stream=st)
        # the finite check on the device: sums of squares of every gradient (one pass over the
        # gradient arena) and of the loss (its column, or the all-reduced sum), then a flag the
        # update kernels read
        library.fill(self._sums, 0.0, stream=st)
        library.sum_squares(b.param_grad_arena, self._sums[0:1], stream=st)
        loss = self._reduced[0:1] if reduced else b.window(g.loss).reshape(self.T * self.S)
        library.sum_squares(loss, self._sums[1:2], stream=st)
        # also picks the step scalars' row by the previous call's flag, before it writes this one's
        library.all_finite(self._sums, self._ok, self._hyper_rows, self._hyper, stream=st)
        if self.clip_norm is not None:  # torch's clip_grad_norm_ from the summed squares, one launch
            library.scale_by_clip(b.param_grad_arena, self._sums[0:1], self.clip_norm, stream=st)
        opt, p, gr, (m, v) = self.optimizer, self.param_arena, b.param_grad_arena, self.slot_arenas  # all at once
        if isinstance(opt, Adam):
            library.adam_update(p, gr, m, v, beta1=opt.betas[0], beta2=opt.betas[1], eps=opt.eps, ok=self._ok,
                                hyper=self._hyper[1:4], stream=st)
        else:
            library.sgd_update(p, gr, m, momentum=opt.momentum, ok=self._ok, hyper=self._hyper[1:3], stream=st)
        b.refresh_transposed(st)
        self._carry(if_finite=True)
