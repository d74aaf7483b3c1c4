"""Hand variants of the S=1 LSTM H=512 loop kernels (an experiment of 2026-12-01,
bench/results/h200-20261201-prefetch-profile-hand-variants-*.json; not part of the package).
pre: pointwise operands independent of the level's GEMM loaded before it (fwd: V1, c in a register;
bwd: every forward value and old gradient of the next timestep during this one's GEMM), the GEMM's
own-row outputs handed over in shared memory. unroll: each lane's 16 vector loads issued at once."""
import sys
from pathlib import Path

HERE = Path(__file__).parent


def _item(reps):
    """A work item's two owned rows (``reps`` rows a unit), its stream and zeroed accumulators."""
    rows = "\n".join(f"""                rem{a} = min(g0 + {a}, nrows - 1)
                jj = rem{a} // {reps}
                r{a} = j0 + jj + (rem{a} - jj * {reps}) * 512""" for a in (0, 1))
    return f"""                sb = item // ngroups
                g0 = (item - sb * ngroups) * 2
{rows}
                s0 = min(sb * 1 + 0, S - 1)
                acc0_0 = float32(0.0)
                acc1_0 = float32(0.0)"""


REDUCE = "\n".join(f"""                off = 16
                while off > 0:
                    acc{a}_0 += cuda.shfl_down_sync(0xFFFFFFFF, acc{a}_0, off)
                    off //= 2""" for a in (0, 1))


def _product(vec, start, stride, inner, unroll):
    """The two-row inner product of a work item over ``vec[t, s0, kk]`` for kk = start, start +
    stride, ... < inner: the 16 loads first (``unroll``), or as generated (unroll 2)."""
    if unroll:
        loads = "\n".join(f"                v{i} = {vec}[t, s0, uint64({start} + {stride * i})]" for i in range(16))
        fmas = "\n".join(f"                acc0_0 += sw0[rem0, uint64({start} + {stride * i})] * v{i}\n"
                         f"                acc1_0 += sw0[rem1, uint64({start} + {stride * i})] * v{i}" for i in range(16))
        return loads + "\n" + fmas
    trip = "\n".join(f"""                    w0_0_{u} = sw0[rem0, uint64(kk{off})]
                    w0_1_{u} = sw0[rem1, uint64(kk{off})]
                    v = {vec}[0 + t, s0, uint64(kk{off})]
                    acc0_0 += w0_0_{u} * v
                    acc1_0 += w0_1_{u} * v""" for u, off in ((0, ""), (1, f" + {stride}")))
    head = "                kk = lane\n" if start == "lane" else ""
    return f"""{head}                while kk + {stride} < {inner}:
{trip}
                    kk += {2 * stride}"""


def gemm_fwd(unroll):
    return _product("V16", "lane", 32, 512, unroll)


def fwd(pre, unroll):
    store0 = "V2[0 + t, s0, r0] = acc0_0 + P3[r0]" if not pre else "x = acc0_0 + P3[r0]; V2[0 + t, s0, r0] = x; sx[rem0] = x"
    store1 = "V2[0 + t, s0, r1] = acc1_0 + P3[r1]" if not pre else "x = acc1_0 + P3[r1]; V2[0 + t, s0, r1] = x; sx[rem1] = x"
    prefetch = """
            if tid < nj:
                j = j0 + tid
                a0 = V1[t, 0, j]
                a1 = V1[t, 0, j + 512]
                a2 = V1[t, 0, j + 1024]
                a3 = V1[t, 0, j + 1536]
                if t == 0:
                    c = V13[0, 0, j]""" if pre else ""
    if pre:
        pointwise = """            if tid < nj:
                j = j0 + tid
                z0 = a0 + sx[tid * 4 + 0]
                z1 = a1 + sx[tid * 4 + 1]
                z2 = a2 + sx[tid * 4 + 2]
                z3 = a3 + sx[tid * 4 + 3]
                c = sigmoid(z1) * c + sigmoid(z0) * math.tanh(z2)
                V13[1 + t, 0, j] = c
                V16[1 + t, 0, j] = sigmoid(z3) * math.tanh(c)"""
    else:
        pointwise = """            item = tid
            while item < S * nj * 1:
                s = item // (nj * 1)
                rem = item - s * (nj * 1)
                jj = rem // 1
                j = j0 + jj + (rem - jj * 1) * 512
                k2_fwd(t, s, j, V1, V2, V13, V16)
                item += bdim"""
    return f'''
@cuda.jit(device=True, inline=True)
def k2_fwd(t, s, j, V1, V2, V13, V16):
    n3_0 = V1[t, s, j + 0] + V2[t, s, j + 0]
    n3_1 = V1[t, s, j + 512] + V2[t, s, j + 512]
    n3_2 = V1[t, s, j + 1024] + V2[t, s, j + 1024]
    n3_3 = V1[t, s, j + 1536] + V2[t, s, j + 1536]
    n13_0 = sigmoid(n3_1) * V13[t, s, j + 0] + sigmoid(n3_0) * math.tanh(n3_2)
    V13[1 + t, s, j + 0] = n13_0
    V16[1 + t, s, j + 0] = sigmoid(n3_3) * math.tanh(n13_0)


@cuda.jit
def prof_fwd(T, S, P2, P3, V1, V2, V13, V16):
    grid = cuda.cg.this_grid()
    tid = cuda.threadIdx.x
    bdim = cuda.blockDim.x
    bid = cuda.blockIdx.x
    nblocks = cuda.gridDim.x
    lane = tid % 32
    warp = tid // 32
    nwarps = bdim // 32
    sw0 = cuda.shared.array((16, 512), float32)
    sx = cuda.shared.array(16, float32)
    j0 = (bid * 512) // nblocks
    nj = ((bid + 1) * 512) // nblocks - j0
    i = tid
    while i < nj * 4 * 512:
        lr = i // 512
        kk = i - lr * 512
        jj = lr // 4
        sw0[lr, kk] = P2[j0 + jj + (lr - jj * 4) * 512, kk]
        i += bdim
    cuda.syncthreads()
    c = float32(0.0)
    a0 = a1 = a2 = a3 = float32(0.0)
    for tick in range(T + 0):
        t = tick
        if t >= 0 and t < T:{prefetch}
            nrows = nj * 4
            ngroups = (nrows + 1) // 2
            item = warp
            while item < ((S + 0) // 1) * ngroups:
{_item(4)}
{gemm_fwd(unroll)}
{REDUCE}
                if lane == 0 and g0 + 0 < nrows and sb * 1 + 0 < S:
                    {store0}
                if lane == 0 and g0 + 1 < nrows and sb * 1 + 0 < S:
                    {store1}
                item += nwarps
            cuda.syncthreads()
{pointwise}
        grid.sync()
'''


def gemm_bwd(unroll):
    return _product("G2", "kk", 128, 2048, unroll)


PW_BWD = """
@cuda.jit(device=True, inline=True)
def k3_math(x0, x1, x2, x3, cprev, gh, gc):
    i = sigmoid(x0)
    f = sigmoid(x1)
    g = math.tanh(x2)
    o = sigmoid(x3)
    c = f * cprev + i * g
    tc = math.tanh(c)
    go = gh * tc * o * (float32(1.0) - o)
    gc = gc + gh * o * (float32(1.0) - tc * tc)
    gi = gc * g * i * (float32(1.0) - i)
    gf = gc * cprev * f * (float32(1.0) - f)
    gg = gc * i * (float32(1.0) - g * g)
    return gi, gf, gg, go, gc * f
"""


def bwd(pre, unroll):
    lvl = pre if pre in (1, 2, 3) else 0
    if pre:
        load_next = """
                j = j0 + tid
                p1_0 = G1[tn, 0, j]
                p1_1 = G1[tn, 0, j + 512]
                p1_2 = G1[tn, 0, j + 1024]
                p1_3 = G1[tn, 0, j + 1536]
                p2_0 = G2[tn, 0, j]
                p2_1 = G2[tn, 0, j + 512]
                p2_2 = G2[tn, 0, j + 1024]
                p2_3 = G2[tn, 0, j + 1536]
                pc = G13[tn, 0, j]
                x0 = V1[tn, 0, j] + V2[tn, 0, j]
                x1 = V1[tn, 0, j + 512] + V2[tn, 0, j + 512]
                x2 = V1[tn, 0, j + 1024] + V2[tn, 0, j + 1024]
                x3 = V1[tn, 0, j + 1536] + V2[tn, 0, j + 1536]
                cprev = V13[tn, 0, j]"""
        pointwise = """            if tid < nj:
                j = j0 + tid
                gh = sh[tid] if LVL >= 3 else G16[1 + t, 0, j]
                gi, gf, gg, go, dcp = k3_math(x0, x1, x2, x3, cprev, gh, gc)
                G2[t, 0, j] = p2_0 + gi
                G2[t, 0, j + 512] = p2_1 + gf
                G2[t, 0, j + 1024] = p2_2 + gg
                G2[t, 0, j + 1536] = p2_3 + go
                G1[t, 0, j] = p1_0 + gi
                G1[t, 0, j + 512] = p1_1 + gf
                G1[t, 0, j + 1024] = p1_2 + gg
                G1[t, 0, j + 1536] = p1_3 + go
                gc = pc + dcp
                G13[t, 0, j] = gc"""
        pointwise = pointwise.replace("LVL", str(lvl))
        before = """    if tid < nj:
        tn = T - 1""" + load_next.replace("\n                ", "\n        ") + """
        gc = G13[T, 0, j]
    if tid < 4:
        sh[tid] = G16[T, 0, j0 + tid] if tid < nj else float32(0.0)
    cuda.syncthreads()"""
        prefetch_gemm = """
            if tid < nj and t > 0:
                tn = t - 1""" + load_next + """
            if tid < nj * 1:
                old = G16[0 + t, 0, j0 + tid]"""
        sumstore = "new = old + acc\n                    G16[0 + t, ss, rr] = new\n                    sh[rem] = new"
        # the split-sum thread i < 2*ngroups... map: old loaded by thread tid for row tid; use a shared array
        prefetch_gemm = prefetch_gemm.replace("old = G16[0 + t, 0, j0 + tid]", "sold[tid] = G16[0 + t, 0, j0 + tid]")
        sumstore = "new = sold[rem] + acc\n                    G16[0 + t, ss, rr] = new\n                    sh[rem] = new"
        if lvl == 2:
            sumstore = "G16[0 + t, ss, rr] = sold[rem] + acc"
        if lvl == 1:
            sumstore = "G16[0 + t, ss, rr] += acc"
    else:
        before = ""
        prefetch_gemm = ""
        pointwise = """            item = tid
            while item < S * nj * 1:
                s = item // (nj * 1)
                rem = item - s * (nj * 1)
                jj = rem // 1
                j = j0 + jj + (rem - jj * 1) * 512
                k3_bwd(t, s, j, G1, G2, G13, G16, V1, V2, V13)
                item += bdim"""
        sumstore = "G16[0 + t, ss, rr] += acc"
    kloop = gemm_bwd(unroll)
    tail = "" if unroll else """
                while kk < 2048:
                    w0_0_0 = sw0[rem0, uint64(kk)]
                    w0_1_0 = sw0[rem1, uint64(kk)]
                    v = G2[0 + t, s0, uint64(kk)]
                    acc0_0 += w0_0_0 * v
                    acc1_0 += w0_1_0 * v
                    kk += 128"""
    return PW_BWD + f'''
@cuda.jit(device=True, inline=True)
def k3_bwd(t, s, j, G1, G2, G13, G16, V1, V2, V13):
    x0 = V1[t, s, j] + V2[t, s, j]
    x1 = V1[t, s, j + 512] + V2[t, s, j + 512]
    x2 = V1[t, s, j + 1024] + V2[t, s, j + 1024]
    x3 = V1[t, s, j + 1536] + V2[t, s, j + 1536]
    gi, gf, gg, go, dcp = k3_math(x0, x1, x2, x3, V13[t, s, j], G16[1 + t, s, j], G13[1 + t, s, j])
    G2[t, s, j] += gi
    G2[t, s, j + 512] += gf
    G2[t, s, j + 1024] += gg
    G2[t, s, j + 1536] += go
    G1[t, s, j] += gi
    G1[t, s, j + 512] += gf
    G1[t, s, j + 1024] += gg
    G1[t, s, j + 1536] += go
    G13[t, s, j] += dcp


@cuda.jit
def prof_bwd(T, S, G1, G2, G13, G16, T2, V1, V2, V13):
    grid = cuda.cg.this_grid()
    tid = cuda.threadIdx.x
    bdim = cuda.blockDim.x
    bid = cuda.blockIdx.x
    nblocks = cuda.gridDim.x
    lane = tid % 32
    warp = tid // 32
    nwarps = bdim // 32
    kp0 = cuda.shared.array((8, 2), float32)
    sh = cuda.shared.array(4, float32)
    sold = cuda.shared.array(4, float32)
    sw0 = cuda.shared.array((4, 2048), float32)
    j0 = (bid * 512) // nblocks
    nj = ((bid + 1) * 512) // nblocks - j0
    i = tid
    while i < nj * 1 * 2048:
        lr = i // 2048
        kk = i - lr * 2048
        jj = lr // 1
        sw0[lr, kk] = T2[j0 + jj + (lr - jj * 1) * 512, kk]
        i += bdim
    cuda.syncthreads()
    j = 0
    tn = 0
    p1_0 = p1_1 = p1_2 = p1_3 = p2_0 = p2_1 = p2_2 = p2_3 = pc = gc = float32(0.0)
    x0 = x1 = x2 = x3 = cprev = float32(0.0)
{before}
    for tick in range(T + 0):
        t = T - 1 - (tick - 0)
        if t >= 0 and t < T:
{pointwise}
        grid.sync()
        if t >= 0 and t < T:{prefetch_gemm}
            nrows = nj * 1
            ngroups = (nrows + 1) // 2
            kw = warp
            while kw < ((S + 0) // 1) * ngroups * 4:
                item = kw // 4
{_item(1)}
                kk = lane + (kw - item * 4) * 32
{kloop}{tail}
{REDUCE}
                if lane == 0: kp0[kw, 0] = acc0_0
                if lane == 0: kp0[kw, 1] = acc1_0
                kw += nwarps
            cuda.syncthreads()
            i = tid
            while i < ((S + 0) // 1) * ngroups * 2:
                item = i // 2
                c = i - item * 2
                aa = c // 1
                sb = item // ngroups
                rem = (item - sb * ngroups) * 2 + aa
                ss = sb * 1 + c - aa * 1
                if rem < nrows and ss < S:
                    jj = rem // 1
                    rr = j0 + jj + (rem - jj * 1) * 512
                    acc = kp0[item * 4 + 0, c] + kp0[item * 4 + 1, c] + kp0[item * 4 + 2, c] + kp0[item * 4 + 3, c]
                    {sumstore}
                i += bdim
        cuda.syncthreads()
'''


for lvl in (1, 2):
    (HERE / f"bwdpre{lvl}.py").write_text(bwd(lvl, 0))
(HERE / "base2.py").write_text(fwd(0, 0) + "\n" + bwd(0, 0))
for pre in (0, 1):
    for unroll in (0, 1):
        name = {(0, 0): "base", (1, 0): "pre", (0, 1): "unroll", (1, 1): "both"}[pre, unroll]
        (HERE / f"{name}.py").write_text(fwd(pre, unroll) + "\n" + bwd(3 if pre else 0, unroll))
