"""``mad_rows<n>``: the FFMA row loops' (codegen/loop_gemm.py) products of one vector element,
``acc_a + w_a * v`` for a < n, in one call instead of n statements ``acc_a += w_a * v``; the n
accumulators travel as one tuple.

    a0_0_0 = mad_rows2(ap0, w0_0_0, w0_1_0, v0_0_0)  # ap0 = (acc0_0, acc1_0)

A numba ``@intrinsic`` that emits what numba emits for those statements (float32 operands: an
``fmul`` and an ``fadd`` a row, rows in order), taking and returning the n accumulators as a
``UniTuple(float32, n)``; the PTX is the same, with and without fastmath (tests/test_loop_ptx.py;
every loop kernel of 15 models: bench/results/cpu-20261204-loop-kernel-compile-mad-rows.txt,
cpu-20261205-loop-kernel-compile-tuple-accumulators.txt). What it saves is numba's front end:
each statement is a multiply and an in-place add to type (in every round of type inference) and
to lower, each through numba's operator templates, and an S=64 LSTM loop kernel's unrolled loop
has over a thousand; a call is one typing of one template (the forward loop kernel of a 2-layer
512-unit LSTM at S=64: 3.0 to 2.3 s on the CPU, with the other source changes of that file 3.7 to
2.4 s). The tuple goes from call to call within a trip of the row loop, packed from the scalar
accumulators at the trip's start and unpacked at its end (codegen/loop_gemm.py): no unpacking a
call (1.72 to 1.45 s), and the loop still carries n scalars (a tuple carried across trips changed
the PTX's index arithmetic).

LLVM IR through llvmlite's builder, not inline PTX (that is codegen/ptx.py's alone). Only the GPU's
loop kernels call it (``coop``, codegen/loop_gemm.py ``mad_function``): the simulator's write the
statements.
"""
from __future__ import annotations

#: the largest n with a ``mad_rows<n>`` (a work item's rows: GemmRows.rows)
MAX_ROWS = 32


def _intrinsic(n: int):
    from numba import types
    from numba.cuda.extending import intrinsic

    def codegen(context, builder, sig, args):
        accs, ws, v = args[0], args[1:n + 1], args[n + 1]
        out = context.get_constant_undef(sig.return_type)
        for a in range(n):  # as numba lowers acc_a += w_a * v
            acc = builder.extract_value(accs, a)
            out = builder.insert_value(out, builder.fadd(acc, builder.fmul(ws[a], v)), a)
        return out

    accumulators = types.UniTuple(types.float32, n)

    def typer(typingctx, *args):
        if len(args) != n + 2 or args[0] != accumulators or any(t != types.float32 for t in args[1:]):
            return None
        return accumulators(*args), codegen

    # numba's intrinsics take no *args: a function with the n + 2 parameters named
    params = ", ".join(["accs"] + [f"w{a}" for a in range(n)] + ["v"])
    scope = {"typer": typer}
    exec(f"def mad_rows{n}(typingctx, {params}):\n    return typer(typingctx, {params})\n", scope)
    return intrinsic(scope[f"mad_rows{n}"])


for _n in range(1, MAX_ROWS + 1):  # about 5 ms for all 32
    globals()[f"mad_rows{_n}"] = _intrinsic(_n)
