"""Hand variants of the S=64 LSTM H=512 loop kernels' products with lane-owned output tiles (an
experiment; not part of the package). In the generated kernels a warp's work item is 8 (forward)
or 4 (backward) rows x 4 streams, its lanes striding over the inner dimension k, and the item's
partial sums are reduced across the warp (the transpose butterfly) before the store: a third of
the forward's instructions are an item's set-up, reduction and store (bench/HISTORY.md section
14). Here each lane owns RT rows x ST streams of the block's (rows x S) output for one slice of
k (the block's warps split k into KS slices), reads 4 neighbouring columns at a time with 16-byte
loads (weights from shared memory, vectors from global), and the KS slices' partial sums meet in
dynamic shared memory after a block barrier, a thread per output adding them and storing.

    python gen.py OUTDIR   (writes OUTDIR/full_fwd.py, full_bwd.py: the generated kernels on 132
                            blocks; generated_tiles_fwd.py, _bwd.py: the same with LoopTuning
                            tiles=1 (codegen/loop_tiles.py); the variants
                            fwd_tile_<RT>x<ST>u<U>.py, bwd_tile_...: U steps of 4 columns a trip;
                            groups4_{items,tiles}_{fwd,bwd}.py: four stream groups, see
                            stream_groups)

Timed by bench/loop_profile.py --files (a variant's outputs are checked against the generated
kernel's: ``max_abs_diff_vs_full``; bench/tiles_gpu.sh's ``kernels`` part); their static SASS by
sass.py beside this file (bench/results/cpu-20261205-loop-tiles-sass.txt, bench/HISTORY.md
section 15).
"""
import re
import sys
from pathlib import Path

WARPS, S = 16, 64


def tile(RT: int, ST: int, rows: int, inner: int, weights: str, vector: str, row_of: str, store: str,
         U: int = 1) -> tuple[str, int]:
    """The block's products as lane-owned tiles: returns the source (indented for the stage body)
    and the bytes of dynamic shared memory for the partial sums. ``rows``: the most rows a block
    owns; lane (rg, sg): rows rg * RT + a, streams of its warp's quarter sg * ST + i."""
    RG = rows // RT               # row groups of a warp
    SGW = 32 // RG                # stream groups of a warp
    per_warp = SGW * ST           # streams a warp covers
    WQ = S // per_warp            # warps that cover all streams
    KS = WARPS // WQ              # k slices
    kslice = inner // KS
    assert RG * SGW == 32 and WQ * per_warp == S and KS * WQ == WARPS and kslice % (4 * U) == 0
    p = " " * 12
    q = p + "    "
    out = [f"{p}ks = warp // {WQ}", f"{p}wq = warp - ks * {WQ}", f"{p}rg = lane // {SGW}", f"{p}sg = lane - rg * {SGW}"]
    out += [f"{p}rl{a} = min(rg * {RT} + {a}, nrows - 1)" for a in range(RT)]
    out += [f"{p}s{i} = wq * {per_warp} + sg * {ST} + {i}" for i in range(ST)]
    out += [f"{p}acc{a}_{i} = float32(0.0)" for a in range(RT) for i in range(ST)]
    out += [f"{p}kk = ks * {kslice}", f"{p}kend = kk + {kslice}"]
    out.append(f"{p}while kk < kend:")
    out += [f"{q}ap{i} = ({', '.join(f'acc{a}_{i}' for a in range(RT))},)" for i in range(ST)]
    for u in range(U):  # the loads of U steps of 4 columns, then their products
        out.append(f"{q}kc{u} = uint64(kk + {4 * u})")
        out += [f"{q}w{a}_0_{u}, w{a}_1_{u}, w{a}_2_{u}, w{a}_3_{u} = load_f32x4({weights}, 0, rl{a}, kc{u})" for a in range(RT)]
        out += [f"{q}v{i}_0_{u}, v{i}_1_{u}, v{i}_2_{u}, v{i}_3_{u} = load_f32x4({vector}, vrow0, s{i}, kc{u})" for i in range(ST)]
    out += [f"{q}ap{i} = mad_rows{RT}(ap{i}, {', '.join(f'w{a}_{c}_{u}' for a in range(RT))}, v{i}_{c}_{u})"
            for u in range(U) for c in range(4) for i in range(ST)]
    out += [f"{q}{', '.join(f'acc{a}_{i}' for a in range(RT))}, = ap{i}" for i in range(ST)]
    out.append(f"{q}kk += {4 * U}")
    out.append(f"{p}part = cuda.shared.array(0, float32)")
    out += [f"{p}part[(ks * {rows} + rg * {RT} + {a}) * {S} + s{i}] = acc{a}_{i}" for a in range(RT) for i in range(ST)]
    out.append(f"{p}cuda.syncthreads()")
    out += [f"{p}o = int64(tid)", f"{p}while o < nrows * S:", f"{q}rl = o // S", f"{q}ss = o - rl * S",
            f"{q}acc = {' + '.join(f'part[({k} * {rows} + rl) * {S} + ss]' for k in range(KS))}",
            *(q + line for line in row_of.splitlines()), f"{q}{store}", f"{q}o += bdim"]
    return "\n".join(out), KS * rows * S * 4


def swap_products(src: str, body: str, start: str, end: str) -> str:
    """``src`` with the lines from the one holding ``start`` to the one holding ``end`` (both
    included) replaced by ``body``."""
    lines = src.splitlines()
    i = next(n for n, line in enumerate(lines) if start in line)
    j = next(n for n, line in enumerate(lines) if end in line and n > i)
    return "\n".join(lines[:i] + [body] + lines[j + 1:]) + "\n"


def forward_variant(src: str, RT: int, ST: int, U: int = 1) -> str:
    src = src.replace("sw0 = cuda.shared.array((16, 512), float32)", "sw3 = cuda.shared.array((1, 16, 512), float32)")
    src = src.replace("sw0[lr, kk] = P2[", "sw3[0, lr, kk] = P2[")
    body, smem = tile(RT, ST, 16, 512, "sw3", "V16", "jj = rl // 4\nrr = j0 + jj + (rl - jj * 4) * 512",
                      "V2[0 + t, ss, rr] = acc + P3[rr]", U)
    src = swap_products(src, "            vrow0 = 0 + t\n" + body, "ngroups = (nrows + 7) // 8", "item += nwarps")
    return (f"DYNAMIC_SMEM = {smem}\nfrom rnngraph.codegen.ptx import load_f32x4\n"
            f"from rnngraph.codegen.mad_rows import mad_rows{RT}\n" + src)


def backward_variant(src: str, RT: int, ST: int, U: int = 1) -> str:
    src = src.replace("sw0 = cuda.shared.array((4, 2048), float32)", "sw3 = cuda.shared.array((1, 4, 2048), float32)")
    src = src.replace("sw0[lr, kk] = T2[", "sw3[0, lr, kk] = T2[")
    body, smem = tile(RT, ST, 4, 2048, "sw3", "G2", "rr = j0 + rl", "G16[0 + t, ss, rr] += acc", U)
    src = swap_products(src, "            vrow0 = 0 + t\n" + body, "ngroups = (nrows + 3) // 4", "item += nwarps")
    return (f"DYNAMIC_SMEM = {smem}\nfrom rnngraph.codegen.ptx import load_f32x4\n"
            f"from rnngraph.codegen.mad_rows import mad_rows{RT}\n" + src)


def generated(reverse: bool, H: int = 512, tiles: int = 0, streams: int = S, blocks: int = 132) -> str:
    """The forward (or backward) loop kernel ``prof_fwd`` / ``prof_bwd`` of a one-layer LSTM (H = I)
    at ``streams`` streams, T = 100, on ``blocks`` blocks; ``tiles``: LoopTuning ``tiles``
    (then, or with a dynamic shared memory at all, with the plan's DYNAMIC_SMEM)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
    import rnngraph as rg
    from rnngraph.codegen.loop import emit_loop_kernel
    from rnngraph.codegen.loop_plan import plan_loop_kernel
    from rnngraph.loop_env import resolve
    from rnngraph.passes import schedule
    from rnngraph.passes.recurrence import recurrent_width
    from rnngraph.schedule import Loop, loop_precision
    g = rg.stacked(rg.cells.STANDARD["lstm"], 1, H, input_size=H).graph
    options, tuning = resolve(streams, overrides={"tiles": tiles, "groups": 1}, recurrent_width=recurrent_width(g), precision="fp32")
    s = schedule(g, 100, streams, "float32", None, options, "fp32")
    kernel_of = {m: k.ops for d in ("forward", "backward") for k in s.kernels(d) for m in k.ops}
    steps = s.backward if reverse else s.forward
    loop = next(st for st in steps if isinstance(st, Loop) and st.mode == "persistent")
    name = "prof_bwd" if reverse else "prof_fwd"
    plan = plan_loop_kernel(g, loop, name, True, kernel_of, streams, blocks, tuning, precision=loop_precision(s))
    text = emit_loop_kernel(g, plan, kernel_of)[0]
    return f"DYNAMIC_SMEM = {plan.dynamic_smem}\n" + text if tiles or plan.dynamic_smem else text


def stream_groups(reverse: bool, tiles: int, G: int = 4) -> str:
    """The kernel of :func:`generated` for S / G streams on 132 / G blocks, made the kernel of G
    stream groups on 132 blocks: block b works for group b // (132 / G) on streams [g S / G,
    (g + 1) S / G) as block b % (132 / G) of that group, so that each block owns G times the rows
    (its weight rows in dynamic shared memory) and reads only its group's vectors: the backward's
    L2 reads of the gate gradients a timestep drop from 64 x 2,048 floats a block (69 MB in all)
    to 16 x 2,048 (17 MB). One grid barrier over all 132 blocks, as before."""
    text = generated(reverse, tiles=tiles, streams=S // G, blocks=132 // G)
    lines = []
    for line in text.splitlines():
        indent = line[:len(line) - len(line.lstrip())]
        body = line.strip()
        if body == "nblocks = cuda.gridDim.x":
            lines += [line, f"{indent}sgroup = bid // (nblocks // {G})", f"{indent}bid = bid - sgroup * (nblocks // {G})",
                      f"{indent}nblocks = nblocks // {G}", f"{indent}sbase = sgroup * (S // {G})", f"{indent}S = S // {G}"]
            continue
        if body.startswith("grid_barrier(BAR, nblocks)"):
            line = line.replace("grid_barrier(BAR, nblocks)", f"grid_barrier(BAR, nblocks * {G})")
        elif re.match(r"s\d+ = min\(", body):
            line = line.replace(" = min(", " = sbase + min(", 1)
        elif body == "ss = sp":
            line = f"{indent}ss = sbase + sp"
        elif re.match(r"k\d+_(fwd|bwd)\(t, s, j,", body):
            line = line.replace("(t, s, j,", "(t, sbase + s, j,", 1)
        lines.append(line)
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    fwd, bwd = generated(False), generated(True)
    (out / "full_fwd.py").write_text(fwd)
    (out / "full_bwd.py").write_text(bwd)
    (out / "generated_tiles_fwd.py").write_text(generated(False, tiles=1))
    (out / "generated_tiles_bwd.py").write_text(generated(True, tiles=1))
    for tiles in (0, 1):
        for reverse in (False, True):
            name = f"groups4_{'tiles' if tiles else 'items'}_{'bwd' if reverse else 'fwd'}.py"
            (out / name).write_text(stream_groups(reverse, tiles))
    for RT, ST, U in ((4, 8, 1), (4, 4, 1), (4, 4, 2), (4, 2, 1), (4, 2, 2), (2, 4, 1)):
        (out / f"fwd_tile_{RT}x{ST}u{U}.py").write_text(forward_variant(fwd, RT, ST, U))
    for RT, ST, U in ((4, 2, 1), (4, 2, 2), (4, 1, 2), (2, 4, 1), (2, 2, 2)):
        (out / f"bwd_tile_{RT}x{ST}u{U}.py").write_text(backward_variant(bwd, RT, ST, U))
