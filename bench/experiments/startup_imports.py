"""Import times on the cold path that need no GPU (not part of the package): fresh interpreters,
the median of ``--repeat``, each line one JSON record.

- ``worker``: what a compile worker (codegen/parallel_compile.py) imports before its first kernel:
  ``rnngraph.codegen.parallel_compile``, ``numba.cuda``, ``rnngraph.codegen.module`` and the
  modules generated loop kernels import (grid barrier, mad_rows, flag exchange); ``networkx`` and
  ``rnngraph.passes`` say whether those came along.
- ``array_math``: ``rnngraph.codegen.device`` and then numba-cuda's ``numba.cuda.np.arraymath``, which
  the CUDA target imports at a process's first kernel compile or load; ``scipy_linalg`` says whether
  it imported SciPy's linear algebra (run with SciPy on the path to see the difference:
  codegen/target_startup.py).

    python bench/experiments/startup_imports.py --repo CHECKOUT [--repeat 7]

Result: bench/results/cpu-20261205-startup-imports.txt.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

PROBES = {
    "worker": "import rnngraph.codegen.parallel_compile; from numba import cuda; from rnngraph.codegen import module; "
              "import rnngraph.codegen.grid_barrier, rnngraph.codegen.mad_rows, rnngraph.codegen.flag_exchange",
    "array_math": "import rnngraph.codegen.device; from numba.cuda.np import arraymath",
}
REPORT = ("import json, sys; print(json.dumps({'seconds': time.perf_counter() - t0, "
          "'networkx': 'networkx' in sys.modules, 'passes': 'rnngraph.passes' in sys.modules, "
          "'scipy_linalg': 'scipy.linalg' in sys.modules}))")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", required=True, help="the rnngraph checkout to import")
    ap.add_argument("--repeat", type=int, default=7, help="fresh interpreters a probe; the median is reported")
    args = ap.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    env["PYTHONPATH"] = os.path.abspath(args.repo) + os.pathsep + env.get("PYTHONPATH", "")
    for name, code in PROBES.items():
        runs = [json.loads(subprocess.run([sys.executable, "-c", f"import time; t0 = time.perf_counter(); {code}; "
                                           + REPORT], env=env, cwd=args.repo, capture_output=True, text=True,
                                          check=True).stdout)
                for _ in range(args.repeat)]
        print(json.dumps({"probe": name, "median_s": round(statistics.median(r["seconds"] for r in runs), 3),
                          "min_s": round(min(r["seconds"] for r in runs), 3),
                          **{k: runs[0][k] for k in ("networkx", "passes", "scipy_linalg")}}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
