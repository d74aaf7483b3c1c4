"""The library kernels a training step launches, with the argument types it launches them with, so
that a worker process can compile them into the disk cache while the persistent loop kernels
compile (codegen/parallel_compile.py): a cold first call otherwise compiled them one after the
other in its first training step, 1.3 to 1.9 s of it
(bench/results/h200-20261204-startup-and-step-selp.json).

The signatures are what four language models (LSTM and GRU, S = 1 to 64, char and word) were
launched with, one per kernel and the same for all four
(bench/results/h200-20261204-library-kernel-signatures.json): float32 C-contiguous arrays,
int32 token ids and flags. A signature a program does not launch costs the worker's time only; a
kernel whose launch types change compiles in the program as before (tests/test_library_ahead.py
checks each entry against its kernel's parameters).
"""
from __future__ import annotations

import importlib

#: (module of rnngraph.codegen, dispatcher attribute, argument types as names: F1 / F2 a float32
#: C array of 1 / 2 dimensions, I1 an int32 C array, f32 / i32 / i64 a scalar)
KERNELS = (
    ("reductions", "softmax_xent_forward_kernel", ("F2", "I1", "i64", "F1")),
    ("reductions", "softmax_xent_backward_kernel", ("F2", "I1", "i64", "F1", "F2")),
    ("optim_kernels", "fill_from_kernel", ("F1", "F1", "i32")),
    ("optim_kernels", "copy_if_kernel", ("F1", "F1", "I1")),
    ("optim_kernels", "all_finite_kernel", ("F1", "I1", "F2", "F1")),
    ("optim_kernels", "adam_kernel", ("F1", "F1", "F1", "F1", "F1", "f32", "f32", "f32", "f32", "f32", "I1")),
    ("optim_kernels", "sum_squares_kernel", ("F1", "F1")),
    ("optim_kernels", "scale_by_clip_kernel", ("F1", "F1", "f32", "F1", "i32")),
    ("gemm", "add_bias_kernel", ("F2", "F1")),
    ("gemm", "column_sum_kernel", ("F2", "F1", "F1", "i32", "i32", "i32", "i32")),
    ("library", "embedding_forward_kernel", ("I1", "F2", "F2")),
    ("library", "embedding_backward_kernel", ("I1", "F2", "F2")),
    ("buffers", "_transpose", ("F2", "F2")),
)


def numba_types(names: tuple) -> tuple:
    """The numba types of a :data:`KERNELS` entry's argument names."""
    from numba import types
    table = {"F1": types.float32[::1], "F2": types.float32[:, ::1], "I1": types.int32[::1],
             "f32": types.float32, "i32": types.int32, "i64": types.int64}
    return tuple(table[n] for n in names)


def kernels() -> list[tuple]:
    """(dispatcher, numba argument types) of every :data:`KERNELS` entry."""
    return [(getattr(importlib.import_module(f"{__package__}.{module}"), attr), numba_types(names))
            for module, attr, names in KERNELS]
