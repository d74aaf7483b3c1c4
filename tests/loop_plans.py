"""The GPU code shape's persistent loop-kernel plans of a small network, for plan tests."""
import rnngraph as rg
from rnngraph.codegen.loop_plan import plan_loop_kernel
from rnngraph.loop_env import resolve
from rnngraph.passes import schedule
from rnngraph.schedule import Loop


def gpu_loop_plans(cell: str, H: int, S: int, knobs: dict, precision: str = "fp32", blocks: int = 132):
    """(graph, kernel_of, the plans of the forward and backward persistent loop kernels) of a
    one-layer standard ``cell`` (H = I) at S streams on ``blocks`` blocks, planned for the GPU
    (``coop``) with RNNGRAPH_LOOP-style ``knobs`` over the defaults for S."""
    g = rg.stacked(rg.cells.STANDARD[cell], 1, H, input_size=H).graph
    options, tuning = resolve(S, overrides=knobs, recurrent_width=H, precision=precision)
    s = schedule(g, 4, S, "float32", None, options, precision)
    kernel_of = {m: k.ops for k in s.kernels("forward") for m in k.ops}
    loops = [st for st in s.forward + s.backward if isinstance(st, Loop) and st.mode == "persistent"]
    return g, kernel_of, [plan_loop_kernel(g, lp, "k", True, kernel_of, S, blocks, tuning, precision=precision)
                          for lp in loops]
