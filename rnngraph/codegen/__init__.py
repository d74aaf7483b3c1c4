"""CUDA backend: the fixed kernel library (library.py) and the per-graph code generators."""
from .simulator_fixes import apply as _apply_simulator_fixes

_apply_simulator_fixes()
