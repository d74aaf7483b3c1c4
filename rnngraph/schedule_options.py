"""ScheduleOptions: the decisions the passes make that are not the graph's, as one value.

``rnngraph.passes.schedule(..., options=)`` takes it (default: :meth:`ScheduleOptions.defaults`
for the schedule's S); the Schedule keeps it, and its dump names the options that differ from
the defaults. The code shape of the loop kernels is ``rnngraph.codegen.tuning.LoopTuning``. Both
are given to ``rg.compile`` / ``rg.compile_rnn`` / ``rnngraph.torch.RNN`` as ``options=`` and
``tuning=``, or set through ``RNNGRAPH_LOOP`` (keys ``ln``, ``flags``, ``lngrad``, ``mma`` here), which
only the API reads (rnngraph/loop_env.py).

Each default, its reason and the measurements behind it (H200, fwd+bwd, H=512, T=100; the
history is in bench/HISTORY.md):

- ``persistent_layer_norms`` up to S = 64: the persistent kernel beat graph mode at S = 1, 16
  and 64 (layernorm_lstm S=64 10.5 vs 18.5 ms, bench/results/h200-20261201-lnsum-sweep-lnsum.json);
  larger S is not measured;
- ``flagged_exchange`` at S = 1: the flags take the grid sync out of the S=1 LSTM's timestep
  (0.947 -> 0.752 ms; bench/results/h200-20261201-flags-sweep-flags-rows.json);
- ``post_loop_sums`` always: the in-loop sums' shared-memory atomics retried under contention
  (layernorm_lstm S=64 8.36 -> 6.99 ms, bench/results/h200-20261201-lngrad-sweep-lngrad.json);
- ``loop_tensor_cores`` never: with the persistent loops' products on tensor cores
  (codegen/loop_mma.py) a tf32 / bf16 LSTM step (fwd+bwd, rnngraph.torch.RNN) took H=512 S=1
  2.38 / 2.25 ms and S=64 5.86 / 5.57 ms, more than the all-fp32 step (1.60, 4.61 ms;
  bench/results/h200-20261203-torch-layer-loop-mma-h512.json), and H=1024 S=64 16.1 / 16.1 ms
  and S=128 29.6 / 29.5 ms (-h1024.json), against 11.4 / 11.8 and 22.5 / 22.2 ms with only the
  window GEMMs in that precision (h200-20261202-torch-layer-precision-h1024.json): each fragment
  load touches 8 rows or streams of 16 bytes, against a lane-contiguous FFMA load.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace

#: Streams up to which layer norms inside a recurrence run in the persistent loop kernel.
LN_PERSISTENT_STREAMS = 64
#: Streams up to which a loop hands its GEMM inputs between blocks through flagged words.
FLAGGED_EXCHANGE_STREAMS = 1


def check_streams(streams) -> int:
    """``streams`` (S, for the per-S defaults); ValueError unless it is a positive integer."""
    if isinstance(streams, bool) or not isinstance(streams, int) or streams < 1:
        raise ValueError(f"streams must be a positive integer, got {streams!r}")
    return streams


@dataclass(frozen=True)
class ScheduleOptions:
    """What the passes decide beyond the graph (each a bool; the class defaults are those of
    S > 64, :meth:`defaults` gives those of any S):

    - ``persistent_layer_norms``: a loop with a layer norm in its recurrence runs as one
      persistent kernel (its row sums added across blocks, passes/row_sums.py); False: it runs
      per timestep, replayed from a CUDA graph (passes/pipeline.py);
    - ``flagged_exchange``: a persistent loop of one stage without layer norms hands the GEMM
      inputs its one pointwise kernel writes to the other blocks as words tagged with their
      timestep instead of after a grid sync (passes/flag_exchange.py);
    - ``post_loop_sums``: a persistent backward loop leaves its layer norms' gain and bias
      gradients to ``reduce`` kernels after it (passes/param_grad_sums.py); False: the loop adds
      them up itself;
    - ``loop_tensor_cores``: in a reduced precision (rnngraph/precision.py) the loops' recurrent
      products take it too -- on tensor cores in the persistent kernels (``mma.sync``,
      codegen/loop_mma.py), operands rounded in the NumPy emulation and the simulator; False:
      they stay fp32 (FFMA), only the once-per-window GEMMs take the precision. No effect in fp32.

    Raises ValueError naming the field and the value for anything but True or False.
    """

    persistent_layer_norms: bool = False
    flagged_exchange: bool = False
    post_loop_sums: bool = True
    loop_tensor_cores: bool = False

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, bool):
                raise ValueError(f"ScheduleOptions.{f.name} must be True or False, got {value!r}")

    @classmethod
    def defaults(cls, streams: int) -> "ScheduleOptions":
        """The measured best for loops over ``streams`` streams (see the module docstring).
        ValueError unless ``streams`` is a positive integer."""
        check_streams(streams)
        return cls(persistent_layer_norms=streams <= LN_PERSISTENT_STREAMS,
                   flagged_exchange=streams <= FLAGGED_EXCHANGE_STREAMS, post_loop_sums=True, loop_tensor_cores=False)

    def replace(self, **changes) -> "ScheduleOptions":
        """A copy with ``changes`` (validated like the constructor)."""
        return replace(self, **changes)

    def changed(self, streams: int) -> dict[str, bool]:
        """The options that differ from :meth:`defaults` for ``streams``: name -> value."""
        base = ScheduleOptions.defaults(streams)
        return {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) != getattr(base, f.name)}
