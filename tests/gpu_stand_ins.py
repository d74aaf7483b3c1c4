"""Python stand-ins for the GPU-only intrinsics a loop kernel generated for the GPU (``coop``)
imports -- the 16-byte loads of codegen/ptx.py and codegen/mad_rows.py's ``mad_rows<n>`` -- so
that numba's simulator can run that code on one block (tests/test_loop_tiles.py). Each computes
what the intrinsic does: four neighbouring float32 elements; ``acc_a + w_a * v`` a row."""


def load_f32x4(a, r, s, k):
    return a[r, s, k], a[r, s, k + 1], a[r, s, k + 2], a[r, s, k + 3]


def load_f32x4_2d(a, r, k):
    return a[r, k], a[r, k + 1], a[r, k + 2], a[r, k + 3]


def load_f32x4_1d(a, i):
    return a[i], a[i + 1], a[i + 2], a[i + 3]


def _mad_rows(accs, *args):
    *ws, v = args
    return tuple(acc + w * v for acc, w in zip(accs, ws))


for _n in range(1, 33):
    globals()[f"mad_rows{_n}"] = _mad_rows


def gpu_source_for_simulator(src: str) -> str:
    """A generated GPU loop module with these stand-ins imported instead of the intrinsics, and
    its shared arrays' alignment argument dropped (the simulator takes none)."""
    lines = []
    for line in src.splitlines():
        if line.startswith(("from rnngraph.codegen.ptx import", "from rnngraph.codegen.mad_rows import")):
            line = "from gpu_stand_ins import " + line.split(" import ", 1)[1]
        lines.append(line.replace(", alignment=16", ""))
    return "\n".join(lines) + "\n"
