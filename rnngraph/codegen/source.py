"""A builder of generated Python source: lines at the current depth, and indentation blocks.

    src = Source(depth=1)
    src("i = tid")
    with src.block("while i < n:"):
        src("x[i] = float32(0.0)", "i += bdim")

writes ``    i = tid`` / ``    while i < n:`` / ``        x[i] = ...`` (four spaces a level). The
persistent loop kernel's emitters (codegen/loop*.py) all write through one; nothing counts
indentation by hand.
"""
from __future__ import annotations

from contextlib import contextmanager

INDENT = "    "


def select(condition: str, if_true: str, if_false: str) -> str:
    """The generated expression of ``if_true if condition else if_false`` as ``cuda.selp``: both
    operands are evaluated (they must be plain values of one numba type, e.g. two float32
    accumulators or two int64 rows), and no branch is made. numba's front end turns each
    conditional expression into three basic blocks, and its liveness and SSA passes cost about the
    number of blocks times the kernel's length: the S=64 LSTM forward loop kernel compiled in 7.5 s
    with its selections as conditional expressions, in 3.6 s as ``cuda.selp`` (and each unroll
    step's column read through one name), for the same PTX
    (bench/results/cpu-20261204-loop-kernel-compile-selp.txt)."""
    return f"cuda.selp({condition}, {if_true}, {if_false})"


class Source:
    """Lines of generated code, each indented by the builder's depth when it is added.

    ``depth``: the depth of the first lines (0: module level). ``text()`` joins the lines with
    newlines (no trailing newline).
    """

    def __init__(self, depth: int = 0):
        self.lines: list[str] = []
        self.depth = depth

    def __call__(self, *lines: str) -> None:
        """Add ``lines``, each at the current depth."""
        self.lines += [INDENT * self.depth + line for line in lines]

    @contextmanager
    def block(self, header: str):
        """Add ``header`` (``for ...:``, ``if ...:``, ``def ...:``), then what the ``with`` body adds one
        level deeper."""
        self(header)
        with self.indented():
            yield self

    @contextmanager
    def indented(self, levels: int = 1):
        """What the ``with`` body adds, ``levels`` deeper."""
        self.depth += levels
        try:
            yield self
        finally:
            self.depth -= levels

    def branch(self, condition: str, then: list[str], otherwise: list[str]) -> None:
        """``if condition:`` with the lines ``then``, ``else:`` with the lines ``otherwise``."""
        with self.block(f"if {condition}:"):
            self(*then)
        with self.block("else:"):
            self(*otherwise)

    def text(self) -> str:
        """The lines joined with newlines."""
        return "\n".join(self.lines)
