"""ScheduleOptions: the decisions the passes make that are not the graph's, as one value.

``rnngraph.passes.schedule(..., options=)`` takes it (default: :meth:`ScheduleOptions.defaults`
for the schedule's S); the Schedule keeps it, and its dump names the options that differ from
the defaults. The code shape of the loop kernels is ``rnngraph.codegen.tuning.LoopTuning``. Both
are given to ``rg.compile`` / ``rg.compile_rnn`` / ``rnngraph.torch.RNN`` as ``options=`` and
``tuning=``, or set through ``RNNGRAPH_LOOP`` (keys ``ln``, ``flags``, ``fwdflags``, ``lngrad``, ``mma``, ``fold`` here), which
only the API reads (rnngraph/loop_env.py).

Each default, its reason and the measurements behind it (H200, fwd+bwd, H=512, T=100; the
history is in bench/HISTORY.md):

- ``persistent_layer_norms`` up to S = 64: the persistent kernel beat graph mode at S = 1, 16
  and 64 (layernorm_lstm S=64 10.5 vs 18.5 ms, bench/results/h200-20261201-lnsum-sweep-lnsum.json);
  larger S is not measured;
- ``flagged_exchange`` up to S = 8, ``flagged_forward`` at S = 1 only: the flags take the grid
  sync out of the S=1 LSTM's timestep (0.947 -> 0.752 ms;
  bench/results/h200-20261201-flags-sweep-flags-rows.json) and one of the three out of
  layernorm_lstm's (2.521 -> 2.255 ms; bench/results/h200-20261204-ln-flags-sweep.json). At S = 8
  (an H100, the 2 x 512 char-LM step) the flagged backward loop kernels took 0.634 / 0.629 ms
  against 0.675 / 0.662 and the flagged forward ones 0.626 / 0.620 against 0.557 / 0.563
  (bench/results/h100-20261206-lm-step-trace-2x512-s8-flags-{0,1}.json), hence the backward
  alone from S = 2. With the early loads of flagged levels (LoopTuning ``prefetch=2``) the step
  took, ms unread, LSTM S=2 1.948 against 2.278, S=4 2.517 / 2.635, S=8 2.835 / 2.929, GRU S=8
  2.520 / 2.896, peephole LSTM 3.485 / 3.647, layer-norm LSTM 8.312 / 8.360
  (bench/results/h100-20261206-lm-step-early-loads-*.json). A flagged loop forgoes stream groups
  (from S = 64 by default) and its flagged vectors the tensor-core chunks; loops on tensor cores
  (:func:`loop_tensor_cores_by_default`) are not flagged by default;
- ``post_loop_sums`` always: the in-loop sums' shared-memory atomics retried under contention
  (layernorm_lstm S=64 8.36 -> 6.99 ms, bench/results/h200-20261201-lngrad-sweep-lngrad.json);
- ``loop_tensor_cores`` in a reduced precision where S x K >= 49,152, or S >= 16 with K >= 1,024
  (:func:`loop_tensor_cores_by_default`; K: the widest recurrent product's inner dimension,
  rnngraph/passes/recurrence.py ``recurrent_width``; an LSTM's H):
  measured in one benchmark grid (bench/results/h200-20261203-precision-grid-targets.json,
  -grid-rest.json, -grid-cells.json; fwd+bwd, T=100, tf32 then bf16, FFMA loops against
  tensor-core loops), LSTM H=1024 S=64 10.87 / 11.61 against 9.82 / 9.77 ms, S=128 22.4 / 22.4
  against 17.7 / 17.7, H=512 S=128 5.61 / 5.76 against 4.93 / 4.40, peephole_lstm H=1024 S=64
  12.86 against 10.26 and layernorm_lstm 15.14 against 12.63 (4 layers alike); below it FFMA:
  H=512 S=64 3.22 / 3.29 against 3.61 / 3.32, S=1 0.74 against 1.72, H=1024 S=1 1.16 against
  3.11. H=768 S=64 (49,152): 7.32 against 7.54 ms (h200-20261203-torch-layer-tf32-mma-loops-h768.json).
  Once the tensor-core loops kept the weight rows that exceed the static shared memory in dynamic
  shared memory (codegen/loop_plan.py), while the FFMA loops still read them from L2 every
  timestep (they now keep them there too from S = 2; the two kinds are not compared again since),
  H=1024 S=16 ran 2.70 / 2.43 on tensor cores against 3.59 / 3.62 ms on FFMA, while S=1 stays
  faster on FFMA, 1.13 / 1.16 against 2.87 / 2.05 (h200-20261204-precision-h1024-s1-s16-loop-kinds.json):
  hence the second clause. Measured on LSTM-family cells only: GRU and Elman cells, whose
  products have fewer rows, and bidirectional layers take the same rule unmeasured
  (bench/README.md); layernorm_lstm H=1024 S=1 (13 % faster on tensor cores in the grid) stays off.
- ``folded_biases`` always: the bias of a once-per-window product summed with a persistent loop's
  product is added by the loop's store instead of a kernel over the window
  (passes/folded_biases.py). Measured on an H100, not the H200: the 2 x 512 S = 64 char-LM step
  7.33 -> 7.24 ms (bench/results/h100-20261206-startup-and-step-s64-fold-{0,1}.json; S = 1 and
  8 in bench/HISTORY.md section 20).
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

#: Streams up to which layer norms inside a recurrence run in the persistent loop kernel.
LN_PERSISTENT_STREAMS = 64
#: Streams up to which a loop hands its GEMM inputs between blocks through flagged words: the
#: backward loops up to FLAGGED_EXCHANGE_STREAMS, the forward ones too up to FLAGGED_FORWARD_STREAMS.
FLAGGED_EXCHANGE_STREAMS = 8
FLAGGED_FORWARD_STREAMS = 1
#: S x K (streams x the widest recurrent product's inner dimension) from which, in a reduced
#: precision, the loops' recurrent products run on tensor cores by default
LOOP_TENSOR_CORES_WORK = 49_152
#: (S, K) from which they do so as well: K wide enough that a block's weight rows exceed the static
#: shared memory (the tensor-core loops then keep them in dynamic shared memory: on the H200's 132
#: blocks up to K of about 1,400 in TF32 and 2,800 in bf16; wider K, unmeasured, reads them from
#: global memory), S at least this
LOOP_TENSOR_CORES_WIDE = (16, 1024)
#: the rule of :func:`loop_tensor_cores_by_default`, as the schedule dump states it
LOOP_TENSOR_CORES_RULE = (f"S x K >= {LOOP_TENSOR_CORES_WORK:,}, or S >= {LOOP_TENSOR_CORES_WIDE[0]} "
                          f"with K >= {LOOP_TENSOR_CORES_WIDE[1]:,}")


def loop_tensor_cores_by_default(streams: int, recurrent_width: int) -> bool:
    """Whether, in a reduced precision, loops over ``streams`` streams whose widest recurrent
    product has inner dimension ``recurrent_width`` (K; 0: not known) run their products on tensor
    cores by default: :data:`LOOP_TENSOR_CORES_RULE` (see the module docstring)."""
    wide_s, wide_k = LOOP_TENSOR_CORES_WIDE
    return bool(recurrent_width) and (streams * recurrent_width >= LOOP_TENSOR_CORES_WORK
                                      or (streams >= wide_s and recurrent_width >= wide_k))


def check_streams(streams) -> int:
    """``streams`` (S, for the per-S defaults); ValueError unless it is a positive integer."""
    if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
        raise ValueError(f"streams must be a positive integer, got {streams!r}")
    return streams


def _check_width(recurrent_width) -> int:
    """``recurrent_width`` (K); ValueError unless it is a non-negative integer."""
    if isinstance(recurrent_width, bool) or not isinstance(recurrent_width, int) or recurrent_width < 0:
        raise ValueError(f"recurrent_width must be a non-negative integer, got {recurrent_width!r}")
    return recurrent_width


@dataclass(frozen=True)
class ScheduleOptions:
    """What the passes decide beyond the graph (each a bool; the class defaults are those of
    S > 64 in fp32, :meth:`defaults` gives those of any S, recurrent width and precision):

    - ``persistent_layer_norms``: a loop with a layer norm in its recurrence runs as one
      persistent kernel (its row sums added across blocks, passes/row_sums.py); False: it runs
      per timestep, replayed from a CUDA graph (passes/pipeline.py);
    - ``flagged_exchange``: a persistent loop of one stage hands each GEMM input that a single
      non-GEMM kernel writes (with or without a layer norm) to the other blocks as words
      tagged with their timestep instead of after a grid sync, where that removes one
      (passes/flag_exchange.py);
    - ``flagged_forward``: with ``flagged_exchange``, the forward loops flag too; False: the
      backward loops alone (no effect without ``flagged_exchange``);
    - ``post_loop_sums``: a persistent backward loop leaves its layer norms' gain and bias
      gradients to ``reduce`` kernels after it (passes/param_grad_sums.py); False: the loop adds
      them up itself;
    - ``loop_tensor_cores``: in a reduced precision (rnngraph/precision.py) the loops' recurrent
      products take it too -- on tensor cores in the persistent kernels (``mma.sync``,
      codegen/loop_mma.py), operands rounded in the NumPy emulation and the simulator; False:
      they stay fp32 (FFMA), only the once-per-window GEMMs take the precision. No effect in fp32.
      By default on where :func:`loop_tensor_cores_by_default` says so;
    - ``folded_biases``: a persistent forward loop's GEMM store adds the bias of the
      once-per-window product its product is summed with, which then gets no bias kernel
      (passes/folded_biases.py); False: each product adds its own bias.

    Raises ValueError naming the field and the value for anything but True or False.
    """

    persistent_layer_norms: bool = False
    flagged_exchange: bool = False
    flagged_forward: bool = False
    post_loop_sums: bool = True
    loop_tensor_cores: bool = False
    folded_biases: bool = True

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, bool):
                raise ValueError(f"ScheduleOptions.{f.name} must be True or False, got {value!r}")

    @classmethod
    def defaults(cls, streams: int, recurrent_width: int = 0, precision: str = "fp32") -> "ScheduleOptions":
        """The measured best for loops over ``streams`` streams whose widest recurrent product has
        inner dimension ``recurrent_width`` (K; rnngraph/passes/recurrence.py ``recurrent_width``;
        0: not known, the loops stay off tensor cores) in ``precision`` ("fp32", "tf32", "bf16";
        see the module docstring). ValueError unless ``streams`` is a positive integer,
        ``recurrent_width`` a non-negative one and ``precision`` one of those three (naming it)."""
        check_streams(streams)
        if precision not in ("fp32", "tf32", "bf16"):  # (rnngraph/precision.py's; this module imports none of rnngraph)
            raise ValueError(f"precision must be one of 'fp32', 'tf32', 'bf16'; got {precision!r}")
        wide = loop_tensor_cores_by_default(streams, _check_width(recurrent_width))
        tensor_cores = precision != "fp32" and wide
        return cls(persistent_layer_norms=streams <= LN_PERSISTENT_STREAMS,
                   flagged_exchange=streams <= FLAGGED_EXCHANGE_STREAMS and not tensor_cores,
                   flagged_forward=streams <= FLAGGED_FORWARD_STREAMS, post_loop_sums=True,
                   loop_tensor_cores=tensor_cores, folded_biases=True)

    def replace(self, **changes) -> "ScheduleOptions":
        """A copy with ``changes`` (validated like the constructor)."""
        return replace(self, **changes)

    def changed(self, streams: int, recurrent_width: int = 0, precision: str = "fp32") -> dict[str, bool]:
        """The options that differ from :meth:`defaults` for ``streams``, ``recurrent_width`` and
        ``precision``: name -> value. ValueError as :meth:`defaults`."""
        base = ScheduleOptions.defaults(streams, recurrent_width, precision)
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(base, f.name)}
