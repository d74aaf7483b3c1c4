"""A TrainingStep's parameters and states as NumPy arrays: read, assigned, zeroed -- for
:class:`rnngraph.runtime.TrainingStep`, whose mixin this is.

On the CPU backend the step holds them (``_params``, ``_state``); on CUDA its backend does
(``_cuda``), and they are copied in and out. ``_carried_nonfinite`` says whether the states the
next call starts from hold a NaN or inf (a ``forward`` on such inputs carried them, or they were
assigned so), for the error of a training call they make not finite (rnngraph/step_outcome.py);
it is kept from host copies only (never read from the GPU). The mixin uses the step's ``graph``, ``dtype``,
``streams``, ``_cuda``, ``_settle`` and ``_lsh`` (an LSH head's index: rnngraph/lsh_train.py).
"""
from __future__ import annotations

import numpy as np

from .arrays import shape_of
from .errors import GraphError, ShapeError
from .reference import reset_streams, zero_states


class StepState:
    """Mixin of ``TrainingStep``: ``parameters``, ``state`` and their setters."""

    @property
    def parameters(self) -> dict[str, np.ndarray]:
        """Parameter name -> array (live on the CPU backend, a copy on CUDA)."""
        self._settle()
        return self._cuda.parameters() if self._cuda else self._params

    @property
    def state(self) -> dict[str, np.ndarray]:
        """State name -> (depth, S, n) array, oldest first: the next window's initial states.
        Assigning ``step.state = {...}`` takes every state by name (none is kept or zeroed
        silently): GraphError naming unknown or missing names, ShapeError naming the state and
        the expected shape; the states are unchanged after a refused assignment."""
        return self._cuda.get_state() if self._cuda else self._state

    @state.setter
    def state(self, value: dict[str, np.ndarray]) -> None:
        """Every state by name, each (depth, S, n). GraphError for an unknown or a missing name
        (a missing one would restart from zeros unnoticed), ShapeError for a wrong shape; the
        states are unchanged then."""
        names = {s.name: s for s in self.graph.states}
        if not isinstance(value, dict):
            raise TypeError(f"step.state takes a dict state name -> (depth, S, n) array, got {type(value).__name__}")
        unknown, missing = sorted(set(value) - set(names)), sorted(set(names) - set(value))
        if unknown or missing:
            raise GraphError(f"step.state: every state by name (states: {sorted(names)}; unknown: {unknown}, "
                             f"missing: {missing})")
        for name, v in value.items():
            s = names[name]
            want = (s.depth, self.streams, self.graph.by_name[s.node].size)
            if shape_of(v) != want:
                raise ShapeError(f"step.state[{name!r}]: expected shape {want} (depth, S, n), got {shape_of(v)}")
        if self._cuda:
            self._cuda.set_state(value)
        else:
            self._state = {k: np.array(v, dtype=self.dtype) for k, v in value.items()}
        self._note_carried(value)

    def reset_state(self, streams=None) -> None:
        """Zero the states of the given streams (ints or bool mask over S; all when None)."""
        if streams is None and self._cuda:
            self._cuda.reset_state()
        elif streams is None:
            self._state = zero_states(self.graph, self.streams, self.dtype)
        else:
            self.state = reset_streams(self.state, streams)
        if streams is None:
            self._carried_nonfinite = False

    def _note_carried(self, states: dict[str, np.ndarray]) -> None:
        """Record whether ``states`` (host arrays: those the next call starts from) hold a NaN or inf."""
        self._carried_nonfinite = not all(np.isfinite(v).all() for v in states.values())

    def set_parameters(self, values: dict[str, np.ndarray]) -> None:
        """Copy arrays into the named parameters; KeyError/ValueError naming a wrong name or shape."""
        shapes = {p.name: p.shape for p in self.graph.params}
        for name, v in values.items():
            if name not in shapes:
                raise KeyError(f"no parameter {name!r} (have {sorted(shapes)})")
            if np.shape(v) != shapes[name]:
                raise ValueError(f"parameter {name!r}: expected shape {shapes[name]}, got {np.shape(v)}")
        if self._cuda:
            self._cuda.set_parameters(values)
        else:
            for name, v in values.items():
                self._params[name][...] = v
        if self._lsh:  # its index follows the new weights at the next training call
            self._lsh.stale = True
