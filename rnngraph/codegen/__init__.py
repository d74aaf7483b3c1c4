"""CUDA backend: the fixed kernel library (library.py) and the per-graph code generators."""
