"""Hand variants of the S=64 LSTM H=512 forward loop kernel's GEMM (an experiment of 2026-12-05;
not part of the package): each lane reads four neighbouring columns with 16-byte loads instead of
one column with 4-byte loads (``f4``: the weight rows from shared memory and the vectors from
global memory; ``f4u2``: two such chunks a trip; ``f4v``, ``f4v4``: two or four chunks a trip with
all their vector loads issued first), ``rs``: the reduced sums' rows and streams computed from their
place instead of select chains (``f4v-rs``: both), and ``st4``: the timestep's vectors (S x 512)
first copied into dynamic shared memory by the whole block with 16-byte loads, the GEMM then
reading both operands from shared memory. Results: bench/HISTORY.md section 14
(bench/results/h100-20261205-vector-loads-s64-fwd*.json, -store-place-s64.json).

    python gen.py OUTDIR   (writes OUTDIR/full.py, the kernel as bench/loop_profile.py's ``full``
                            on 132 blocks, and the variants)
"""
import sys
from pathlib import Path

LOADS = '''
from llvmlite import ir as _ir
from numba import types as _types
from numba.cuda import cgutils as _cgutils
from numba.cuda.extending import intrinsic as _intrinsic

from rnngraph.codegen.ptx import load_f32x4


@_intrinsic
def ld4_1d(typingctx, a, k):
    """a[k : k + 4] of a 1-D float32 array (shared memory here) with one 16-byte load."""
    def codegen(context, builder, sig, args):
        ind = context.cast(builder, args[1], sig.args[1], _types.intp)
        ary = context.make_array(sig.args[0])(context, builder, value=args[0])
        ptr = _cgutils.get_item_pointer(context, builder, sig.args[0], ary, [ind], wraparound=False)
        vec = builder.load(builder.bitcast(ptr, _ir.VectorType(_ir.FloatType(), 4).as_pointer(ptr.type.addrspace)), align=16)
        return context.make_tuple(builder, sig.return_type,
                                  [builder.extract_element(vec, _ir.Constant(_ir.IntType(32), i)) for i in range(4)])
    return _types.UniTuple(_types.float32, 4)(a, k), codegen
'''


def gemm(RB, SB, inner, vec_of, U, vectors_first=False):
    """The body of a work item's products: lanes own 4 neighbouring columns, a trip U chunks of
    128; ``vectors_first``: the vector loads of all U chunks before any chunk's weight loads and
    products (fewer registers live than ``f4u2``)."""
    pad = " " * 20
    out = ["                kk = lane * 4", f"                while kk < {inner}:"]
    out += [f"{pad}ap{i} = ({', '.join(f'acc{a}_{i}' for a in range(RB))},)" for i in range(SB)]

    def vectors(u):
        return [f"{pad}v{i}_0_{u}, v{i}_1_{u}, v{i}_2_{u}, v{i}_3_{u} = {vec_of(i, u)}" for i in range(SB)]
    if vectors_first:
        out += [line for u in range(U) for line in [f"{pad}kc{u} = uint64(kk + {128 * u})"] + vectors(u)]
    for u in range(U):
        out += [] if vectors_first else [f"{pad}kc{u} = uint64(kk + {128 * u})"]
        out += [f"{pad}w{a}_0_{u}, w{a}_1_{u}, w{a}_2_{u}, w{a}_3_{u} = load_f32x4(sw3, 0, rem{a}, kc{u})" for a in range(RB)]
        out += [] if vectors_first else vectors(u)
        out += [f"{pad}ap{i} = mad_rows{RB}(ap{i}, {', '.join(f'w{a}_{q}_{u}' for a in range(RB))}, v{i}_{q}_{u})"
                for i in range(SB) for q in range(4)]
    out += [f"{pad}{', '.join(f'acc{a}_{i}' for a in range(RB))}, = ap{i}" for i in range(SB)]
    out.append(f"{pad}kk += {128 * U}")
    return "\n".join(out)


ARITHMETIC_STORE = """                rem = min(g0 + aa, nrows - 1)
                jj = rem // 4
                rsel = j0 + jj + (rem - jj * 4) * 512
                ssel = min(sb * 4 + ii, S - 1)
"""


def arithmetic_store(src: str) -> str:
    """The store's row and stream computed from the sum's place (aa, ii) instead of select chains."""
    start = src.index("                rsel = r0\n")
    end = src.index("                if (lane & 0) == 0 and ix < 32")
    return src[:start] + ARITHMETIC_STORE + src[end:]


def variant(src: str, name: str) -> str:
    if name == "rs":
        return arithmetic_store(src)
    src = src.replace("sw0 = cuda.shared.array((16, 512), float32)", "sw3 = cuda.shared.array((1, 16, 512), float32)")
    src = src.replace("sw0[lr, kk] = P2[", "sw3[0, lr, kk] = P2[")
    start = src.index("                kk = lane\n")
    end = src.index("                up = (lane & 16) != 0")
    U = 2 if name in ("f4u2", "f4v", "f4v-rs") else 4 if name == "f4v4" else 1
    if name.startswith("f4v"):
        body = gemm(8, 4, 512, lambda i, u: f"load_f32x4(V16, vrow0, s{i}, kc{u})", U, vectors_first=True)
    elif name == "st4":
        body = gemm(8, 4, 512, lambda i, u: f"ld4_1d(hs, uint64(s{i} * 512) + kc{u})", U)
    else:
        body = gemm(8, 4, 512, lambda i, u: f"load_f32x4(V16, vrow0, s{i}, kc{u})", U)
    src = src[:start] + body + "\n" + src[end:]
    if name.endswith("-rs"):
        src = arithmetic_store(src)
    if name == "st4":
        src = src.replace("    cuda.syncthreads()\n    grid.sync()\n",
                          "    hs = cuda.shared.array(0, float32)\n    cuda.syncthreads()\n    grid.sync()\n", 1)
        stage = '''            # the timestep's vectors into shared memory, 16 bytes a load
            i = int64(tid) * 4
            while i < S * 512:
                sx = i // 512
                kx = i - sx * 512
                h0, h1, h2, h3 = load_f32x4(V16, 0 + t, sx, uint64(kx))
                hs[i] = h0
                hs[i + 1] = h1
                hs[i + 2] = h2
                hs[i + 3] = h3
                i += bdim * 4
            cuda.syncthreads()
'''
        anchor = "            nrows = nj * 4\n"
        src = src.replace(anchor, stage + anchor, 1)
        src = "DYNAMIC_SMEM = 64 * 512 * 4\n" + src
    return LOADS + "\n" + src


def generated(S: int = 64, H: int = 512) -> str:
    """The forward loop kernel ``prof_fwd`` of a one-layer LSTM (H = I) at S streams, T = 100, on 132 blocks."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    import rnngraph as rg
    from rnngraph.codegen.loop import emit_loop_kernel
    from rnngraph.codegen.loop_plan import plan_loop_kernel
    from rnngraph.loop_env import resolve
    from rnngraph.passes import schedule
    from rnngraph.passes.recurrence import recurrent_width
    from rnngraph.schedule import Loop, loop_precision
    g = rg.stacked(rg.cells.STANDARD["lstm"], 1, H, input_size=H).graph
    options, tuning = resolve(S, overrides={"groups": 1}, recurrent_width=recurrent_width(g), precision="fp32")
    s = schedule(g, 100, S, "float32", None, options, "fp32")
    kernel_of = {m: k.ops for k in s.kernels("forward") for m in k.ops}
    loop = next(st for st in s.forward if isinstance(st, Loop) and st.mode == "persistent")
    plan = plan_loop_kernel(g, loop, "prof_fwd", True, kernel_of, S, 132, tuning, precision=loop_precision(s))
    return emit_loop_kernel(g, plan, kernel_of)[0]


if __name__ == "__main__":
    out = Path(sys.argv[1])
    text = generated()
    out.mkdir(parents=True, exist_ok=True)
    (out / "full.py").write_text(text)
    for name in ("f4", "f4u2", "st4", "rs", "f4v", "f4v4", "f4v-rs"):
        (out / f"{name}.py").write_text(variant(text, name))
