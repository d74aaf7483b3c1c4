"""Static SASS of loop-kernel modules (gen.py's files), without a GPU: each file's kernel compiled
to PTX for sm_90 by numba (its parameters typed by name: T, S int64; BAR uint32; P<n>/T<n> 2-D
weights, P3 1-D; the rest 3-D float32 buffers), then to SASS by ``ptxas -arch=sm_90
-maxrregcount=128`` (the 512-thread launch bounds' budget) and listed by ``cuobjdump -sass``
(both from a CUDA toolkit on PATH, or CUOBJDUMP). Prints per file: spill bytes, static
instructions, FFMA, and the loop with the highest share of FFMA among those with at least 32
(FFMA, instructions): the products' trip.

    python sass.py OUTDIR/full_fwd.py OUTDIR/generated_tiles_fwd.py ...
"""
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))


def ptx_of(path: str) -> str:
    import numba.cuda.dispatcher
    from numba import cuda, types

    class _H200:  # device functions compile for the current device's cc: none here
        compute_capability = (9, 0)
    numba.cuda.dispatcher.get_current_device = _H200
    from rnngraph.codegen import module
    from rnngraph.codegen.pointwise import PRELUDE
    text = Path(path).read_text()
    kern = getattr(module.load(PRELUDE + "\n\n" + text), "prof_bwd" if "def prof_bwd(" in text else "prof_fwd")
    typed = {"T": types.int64, "S": types.int64, "BAR": types.Array(types.uint32, 1, "C"),
             "P3": types.Array(types.float32, 1, "C")}
    sig = tuple(typed.get(p, types.Array(types.float32, 2 if re.fullmatch(r"[PT]\d+", p) else 3, "C"))
                for p in inspect.signature(kern.py_func).parameters)
    return cuda.compile_ptx(kern.py_func, sig, cc=(9, 0))[0]


def sass_of(ptx: str, stem: str) -> tuple[str, list[tuple[int, str]]]:
    Path(f"/tmp/{stem}.ptx").write_text(ptx)
    info = subprocess.run(["ptxas", "-arch=sm_90", "-maxrregcount=128", "-v", "-c", f"/tmp/{stem}.ptx", "-o",
                           f"/tmp/{stem}.cubin"], capture_output=True, text=True, check=True).stderr
    listing = subprocess.run([os.environ.get("CUOBJDUMP", "cuobjdump"), "-sass", f"/tmp/{stem}.cubin"],
                             capture_output=True, text=True, check=True).stdout
    rows = [(int(m.group(1), 16), m.group(2)) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", listing)]
    return re.search(r"(\d+) bytes spill stores", info).group(1), rows


def products_trip(rows) -> tuple[int, int]:
    addr = [a for a, _ in rows]
    loops = []
    for n, (a, ins) in enumerate(rows):
        m = re.search(r"BRA .*?(0x[0-9a-f]+)", ins)
        if m and int(m.group(1), 16) <= a and int(m.group(1), 16) in addr:
            body = [i for _, i in rows[addr.index(int(m.group(1), 16)):n + 1]]
            loops.append((sum("FFMA" in i for i in body), len(body)))
    return max(loops, key=lambda x: (x[0] >= 32, x[0] / x[1]))


if __name__ == "__main__":
    for path in sys.argv[1:]:
        spills, rows = sass_of(ptx_of(path), Path(path).stem)
        fma, n = products_trip(rows)
        print(f"{Path(path).name}: spill stores {spills} B, {len(rows)} instructions, "
              f"{sum('FFMA' in i for _, i in rows)} FFMA; products' trip {n} instructions, {fma} FFMA "
              f"({n / fma:.2f} a FFMA)")
