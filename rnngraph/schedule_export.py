"""Other forms of a Schedule: JSON for tools, Graphviz DOT of the folded graph, a Gantt PNG.

- :func:`to_json`: a dict (``json.dumps``-able, deterministic) with the header, every step and
  kernel, and the totals;
- :func:`to_dot`: the folded graph (delays as edge labels), each loop SCC boxed in a cluster,
  hoisted nodes outside the boxes;
- :func:`gantt`: a PNG chart (matplotlib) of the first timesteps of the forward loop: one row per
  stage, one bar per kernel at its level, so what runs concurrently is stacked vertically.
"""
from __future__ import annotations

from dataclasses import asdict

from .schedule import Loop, Phase, Schedule, gemm_precision


def to_json(s: Schedule) -> dict:
    """The schedule as plain data: keys ``graph``, ``window``, ``streams``, ``dtype``, ``plan``,
    ``reason``, ``forward``/``backward`` (lists of steps with their kernels; a loop's
    ``grid_syncs_after`` lists the levels whose end needs a grid sync, ``folded_biases`` its
[loop product, window product] pairs: passes/folded_biases.py), ``work_flops``,
    ``critical_path_levels``, ``parallelism_flops_per_level``, ``launches_per_window``; in a
    precision other than fp32 also ``precision``, and each GEMM kernel's ``precision``
    (rnngraph.schedule.gemm_precision); where the schedule records its options, ``options``
    (rnngraph.schedule_options.ScheduleOptions as a dict) and ``options_changed`` (those that
    differ from the defaults for the schedule's S, recurrent width and precision: what the text
    dump's "options (not the defaults ...)" line lists)."""

    def kernel(x, k):
        d = asdict(k)
        if s.precision != "fp32" and gemm_precision(s, x, k):
            d["precision"] = gemm_precision(s, x, k)
        return d

    def step(x):
        if isinstance(x, Phase):
            return {"type": "phase", "name": x.name, "kernels": [kernel(x, k) for k in x.kernels]}
        return {"type": "loop", "name": x.name, "reverse": x.reverse, "mode": x.mode, "levels": x.levels,
                "reduction_syncs": x.reduction_syncs, "grid_syncs_after": list(x.sync_after),
                "early_row_sums": list(x.early_sums), "post_loop_sums": list(x.post_sums),
                "flagged": list(x.flagged),
                "folded_biases": [list(f) for f in x.folded_biases], "ticks": x.ticks,
                "stages": [{"offset": o, "label": lbl} for o, lbl in x.stages],
                "kernels": [kernel(x, k) for k in x.kernels]}

    extra = {"precision": s.precision} if s.precision != "fp32" else {}
    if s.options is not None:  # the passes' options, and those not the defaults for S, K and precision
        extra["options"] = asdict(s.options)
        extra["options_changed"] = s.options_changed()
    return {"graph": s.graph.name, "window": s.window, "streams": s.streams, "dtype": s.dtype, **extra,
            "plan": s.plan, "reason": s.reason,
            "forward": [step(x) for x in s.forward], "backward": [step(x) for x in s.backward],
            "work_flops": s.work, "critical_path_levels": s.critical_path,
            "parallelism_flops_per_level": s.work / max(s.critical_path, 1), "launches_per_window": s.launches}


def _quote(name: str) -> str:
    return '"' + name.replace('"', r'\"') + '"'


def to_dot(s: Schedule) -> str:
    """Graphviz DOT text of the folded graph with loop SCCs boxed (``dot -Tpng`` renders it)."""
    g = s.graph
    loops = [step for step in s.forward if isinstance(step, Loop)]
    in_loop: dict[str, str] = {}
    for loop in loops:
        for k in loop.kernels:
            for m in k.ops:
                in_loop[m] = f"{loop.name} stage {k.stage}"
    lines = [f"digraph {_quote(g.name)} {{", "  rankdir=LR;", "  node [shape=box, fontsize=10];"]
    clusters: dict[str, list[str]] = {}
    for n in g.nodes:
        clusters.setdefault(in_loop.get(n.name, ""), []).append(n.name)
    for j, (label, names) in enumerate(sorted(clusters.items())):
        body = [f"    {_quote(m)} [label=\"{m}\\n{g.by_name[m].op}\"];" for m in names]
        if label:
            lines += [f"  subgraph cluster_{j} {{", f"    label={_quote(label)}; style=rounded;"] + body + ["  }"]
        else:
            lines += [line[2:] for line in body]
    for n in g.nodes:
        for r in n.args:
            attrs = f' [label="t-{r.delay}", style=dashed]' if r.delay else ""
            lines.append(f"  {_quote(r.node)} -> {_quote(n.name)}{attrs};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def gantt(s: Schedule, path: str, timesteps: int = 4) -> None:
    """Write a PNG Gantt chart of the forward schedule's first ``timesteps`` ticks to ``path``.

    Raises ImportError with an install hint when matplotlib is missing.
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("the Gantt chart needs matplotlib: pip install 'rnngraph[plot]'") from e
    rows: dict[str, int] = {}
    bars = []  # (row label, start, width, text)
    x = 0
    for step in s.forward:
        if isinstance(step, Phase):
            for k in step.kernels:
                bars.append((step.name, x, 1, k.name))
                x += 1
            continue
        for tick in range(min(timesteps, step.ticks)):
            for level in range(1, step.levels + 1):
                for offset, label in step.stages:
                    t = tick - offset
                    if t < 0:
                        continue
                    ks = step.at(level, offset)
                    if ks:
                        bars.append((f"{step.name} stage {offset} ({label})", x, 1,
                                     f"t{t}:" + "+".join(k.name for k in ks)))
                x += 1
    for label, *_ in bars:
        rows.setdefault(label, len(rows))
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * x + 2), 0.6 * len(rows) + 1.5))
    for label, start, width, text in bars:
        y = rows[label]
        ax.barh(y, width * 0.95, left=start, color=f"C{y % 10}", alpha=0.7)
        ax.text(start + 0.05, y, text, va="center", fontsize=7)
    ax.set_yticks(list(rows.values()), list(rows.keys()), fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("levels; bars in one column run concurrently")
    ax.set_title(f"{s.graph.name}: plan={s.plan}, first {timesteps} timesteps of the forward loop", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
