"""RNNGRAPH_LOOP, read once at the API boundary into the values the compiler takes.

``RNNGRAPH_LOOP="key=value,..."`` overrides, key by key, the defaults for each S of the schedule
options (keys ``ln``, ``flags``, ``lngrad``, ``mma``, ``fold``: rnngraph/schedule_options.py) and of the loop
kernels' code shape (the knobs of rnngraph/codegen/tuning.py), for tuning runs
(bench/loop_sweep.py). ``rg.compile``, ``rg.compile_rnn`` (and so ``rnngraph.torch.RNN``), the
CLI and rnngraph/bench/ call :func:`from_environment` once, when they are created, and
:func:`resolve` for each S they compile; nothing below them reads the variable.
"""
from __future__ import annotations

import os
from dataclasses import asdict, fields
from types import MappingProxyType

from .codegen.tuning import LoopTuning, knob_problem
from .schedule_options import ScheduleOptions

VARIABLE = "RNNGRAPH_LOOP"
#: RNNGRAPH_LOOP key -> the ScheduleOptions field it sets (0 or 1: False or True)
SCHEDULE_KEYS = MappingProxyType({"ln": "persistent_layer_norms", "flags": "flagged_exchange", "fwdflags": "flagged_forward",
                                  "lngrad": "post_loop_sums", "mma": "loop_tensor_cores",
                                  "fold": "folded_biases"})
TUNING_KEYS = tuple(f.name for f in fields(LoopTuning))
KEYS = tuple(SCHEDULE_KEYS) + TUNING_KEYS


def parse(text: str) -> MappingProxyType:
    """RNNGRAPH_LOOP's ``text`` (``"key=value,..."``; blank items ignored) as a read-only mapping
    key -> int, every value checked. Raises ValueError naming the variable, its whole text and
    the key: for an item without ``=``, an unknown key, a key given twice, a value that is not an
    integer or is out of the knob's range."""
    where = f"{VARIABLE}={text!r}"
    values = {}
    for item in filter(str.strip, text.split(",")):
        key, eq, val = item.partition("=")
        key = key.strip()
        if not eq:
            raise ValueError(f"{where}: expected key=value pairs with keys {sorted(KEYS)}, got {item!r}")
        if key not in KEYS:
            raise ValueError(f"{where}: unknown key {key!r} (keys: {sorted(KEYS)})")
        if key in values:  # which one was meant is not ours to guess
            raise ValueError(f"{where}: {key} given twice")
        try:
            value = int(val)
        except ValueError:
            raise ValueError(f"{where}: {key} must be an integer, got {val!r}") from None
        problem = (f"{key} must be 0 or 1, got {value}" if value not in (0, 1) else None) if key in SCHEDULE_KEYS \
            else knob_problem(key, value)
        if problem:
            raise ValueError(f"{where}: {problem}")
        values[key] = value
    return MappingProxyType(values)


def from_environment() -> MappingProxyType:
    """:func:`parse` of the variable as the environment has it now (empty when unset)."""
    return parse(os.environ.get(VARIABLE, "").strip())


def check(options, tuning) -> None:
    """TypeError unless ``options`` is None or a ScheduleOptions and ``tuning`` None or a LoopTuning."""
    if options is not None and not isinstance(options, ScheduleOptions):
        raise TypeError(f"options must be an rg.ScheduleOptions, got {type(options).__name__}")
    if tuning is not None and not isinstance(tuning, LoopTuning):
        raise TypeError(f"tuning must be an rg.LoopTuning, got {type(tuning).__name__}")


def resolve(streams: int, options: ScheduleOptions | None = None, tuning: LoopTuning | None = None,
            overrides=MappingProxyType({}), recurrent_width: int = 0,
            precision: str = "fp32") -> tuple[ScheduleOptions, LoopTuning]:
    """The schedule options and loop tuning of a compile over ``streams`` streams: ``options`` and
    ``tuning`` as given; each one left None is the defaults (for ``streams``; the options also
    for the graph's ``recurrent_width`` and the compile's ``precision``:
    ScheduleOptions.defaults) overridden by the keys of ``overrides`` (a :func:`parse` result)
    that belong to it. TypeError as :func:`check`; ValueError as ScheduleOptions.defaults."""
    check(options, tuning)
    if options is None:
        options = ScheduleOptions.defaults(streams, recurrent_width, precision).replace(
            **{SCHEDULE_KEYS[k]: bool(v) for k, v in overrides.items() if k in SCHEDULE_KEYS})
    if tuning is None:
        tuning = LoopTuning.defaults(streams).replace(**{k: v for k, v in overrides.items() if k in TUNING_KEYS})
    return options, tuning


def as_keys(options: ScheduleOptions, tuning: LoopTuning) -> dict[str, int]:
    """Both values as RNNGRAPH_LOOP's keys -> ints (the ``loop_tuning`` of benchmark records)."""
    keys = {k: int(getattr(options, name)) for k, name in SCHEDULE_KEYS.items()}
    return {**keys, **asdict(tuning)}
