"""Markdown tables and a plot from one benchmark results JSON (bench/run_all.py and rnngraph
bench write the format).

Usage:
  python bench/report.py bench/results/h200-YYYYMMDD.json                 # markdown to stdout
  python bench/report.py bench/results/h200-YYYYMMDD.json --md bench/README.md \\
      --plot bench/results/h200-YYYYMMDD.png

``--md FILE`` replaces the text between the markers ``<!-- results -->`` and
``<!-- /results -->`` in FILE (appending the markers and the section when FILE lacks them);
``--section NAME`` uses ``<!-- results:NAME -->`` ... ``<!-- /results:NAME -->`` instead, so one
README holds several runs. Records of bench/loop_sweep.py (with a ``setting``) become columns
``rnngraph [setting]``.
Tables: one row per configuration, one column per implementation, each entry "ms (speed-up)",
the speed-up being the cudnn-fp32 time of the same configuration in the same run divided by
this time (above 1 = faster than cuDNN; cells cuDNN lacks are compared with cuDNN's plain LSTM
of the same shape, marked †). The plot: time (ms) against streams S, log-log, one line per
implementation, LSTM H=512 T=100 one layer, forward and forward+backward panels.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # rnngraph from this checkout

from rnngraph.bench import IMPLS, anchor, speedup  # noqa: E402

BEGIN, END = "<!-- results -->", "<!-- /results -->"
CELL_ORDER = ("lstm", "peephole_lstm", "gru", "layernorm_lstm")
METRICS = (("fwdbwd_ms", "Forward + backward"), ("fwd_ms", "Forward"))
#: Table columns and plot lines, the anchor first.
ORDER = ("cudnn-fp32", "cudnn-tf32", "rnngraph", "rnngraph-naive", "torch-eager", "torchscript", "torch-compile",
         "torch-compile-cell")


def _order(impls) -> list[str]:
    return [i for i in ORDER if i in impls] + [i for i in impls if i not in ORDER]


def _task(r: dict) -> str:
    return r.get("task", "layer")


def config_key(r: dict) -> tuple:
    """Sort key of a record's configuration: cell, layers, T, H, I, S (vocab for LMs)."""
    cell = CELL_ORDER.index(r["cell"]) if r["cell"] in CELL_ORDER else len(CELL_ORDER)
    return (_task(r), cell, r["cell"], r["layers"], r["T"], r["H"], r["I"], r["S"], r.get("vocab") or 0, r["dtype"])


def config_name(r: dict) -> str:
    """``lstm ×4 T=100 S=64 H=512`` (``I=`` when it differs from H; ``vocab`` for an LM)."""
    layers = f" ×{r['layers']}" if r["layers"] != 1 else ""
    s = f"{r['cell']}{layers} T={r['T']} S={r['S']} H={r['H']}"
    if _task(r) == "lm":
        return f"{s} embed={r['I']} vocab={r.get('vocab')}"
    return s if r["I"] == r["H"] else f"{s} I={r['I']}"


def _ms(v: float | None) -> str:
    return "—" if v is None else (f"{v:.3g}" if v < 10 else f"{v:.1f}")


def _x(x: float) -> str:
    """A speed-up: 84×, 1.76×, 0.023×."""
    return f"{x:.0f}×" if x >= 10 else f"{x:.2f}×" if x >= 0.1 else f"{x:.2g}×"


def rows(records: list[dict]) -> list[tuple[str, dict[str, dict]]]:
    """[(config name, {impl: record})] of the layer records, in config order."""
    groups: dict[tuple, dict[str, dict]] = {}
    for r in sorted((r for r in records if _task(r) == "layer"), key=config_key):
        groups.setdefault(config_key(r), {}).setdefault(r["impl"], r)
    return [(config_name(next(iter(g.values()))), g) for g in groups.values()]


def layer_table(records: list[dict], metric: str) -> str:
    """The markdown table of ``metric`` ("fwd_ms" or "fwdbwd_ms") for every layer config."""
    table = rows(records)
    present = list(dict.fromkeys(i for _, g in table for i in g))
    impls = [i for i in _order(IMPLS) if i in present] + [i for i in present if i not in IMPLS]
    out = ["| configuration | " + " | ".join(impls) + " |", "|---" * (len(impls) + 1) + "|"]
    for name, g in table:
        cells = []
        for impl in impls:
            r = g.get(impl)
            if r is None:
                cells.append("")
            elif r.get("error"):
                cells.append("error")
            elif impl == "cudnn-fp32" or r.get(metric) is None:
                cells.append(_ms(r.get(metric)))
            else:
                base, same_cell = anchor(r, records)
                x = speedup(base and base.get(metric), r[metric])
                cells.append(_ms(r[metric]) + ("" if x is None else f" ({_x(x)}{'' if same_cell else '†'})"))
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def lm_table(records: list[dict]) -> str:
    """CPU (NumPy backend) against GPU training steps of the same language model, in ms."""
    lms = sorted((r for r in records if _task(r) == "lm" and r["impl"] == "rnngraph-cpu"), key=config_key)
    if not lms:
        return ""
    out = ["| configuration | rnngraph-cpu | rnngraph (GPU) | GPU speed-up |", "|---|---|---|---|"]
    for r in lms:
        gpu, _ = anchor(r, records)
        x = speedup(r.get("step_ms"), gpu and gpu.get("step_ms"))
        cpu = "error" if r.get("error") else _ms(r.get("step_ms"))
        out.append(f"| {config_name(r)} | {cpu} | {_ms(gpu and gpu.get('step_ms'))} | "
                   f"{'—' if x is None else _x(x)} |")
    return "\n".join(out)


def summary(records: list[dict]) -> list[str]:
    """Headline lines: in how many configs rnngraph beats cudnn-fp32, and the range of speed-ups,
    for the cells cuDNN has and (against cuDNN's plain LSTM) for the others."""
    out = []
    for metric, what in METRICS:
        for same in (True, False):
            xs = []
            for r in records:
                if r["impl"] == "rnngraph" and _task(r) == "layer" and not r.get("error"):
                    base, same_cell = anchor(r, records)
                    x = speedup(base and base.get(metric), r.get(metric))
                    if x is not None and same_cell == same:
                        xs.append((x, config_name(r)))
            if xs:
                lo, hi = min(xs), max(xs)
                cells = "cells cuDNN has" if same else "other cells, against cuDNN's plain LSTM"
                out.append(f"- {what.lower()}, {cells}: rnngraph is faster than cuDNN fp32 in "
                           f"{sum(x > 1 for x, _ in xs)} of {len(xs)} configurations; speed-up from "
                           f"{_x(lo[0])} ({lo[1]}) to {_x(hi[0])} ({hi[1]}).")
    for other in ("rnngraph-naive", "torch-eager", "torchscript", "torch-compile"):
        xs = []
        for r in records:
            if r["impl"] == other and _task(r) == "layer" and not r.get("error"):
                mine = [m for m in records if m["impl"] == "rnngraph" and config_key(m) == config_key(r)]
                x = speedup(r.get("fwdbwd_ms"), mine[0].get("fwdbwd_ms")) if mine else None
                if x is not None:
                    xs.append((config_key(r), x, config_name(r)))
        if xs:
            what = " (what the passes buy)" if other == "rnngraph-naive" else ""
            out.append(f"- forward + backward against {other}{what}: rnngraph is "
                       + ", ".join(f"{_x(x)} as fast ({name})" for _, x, name in sorted(xs)) + ".")
    return out


def problems(result: dict) -> list[str]:
    out = []
    for r in result["records"]:
        if r.get("error"):
            name = f"{config_name(r)} / {r['impl']}"
            out.append(f"- error, {name}: `{r['error'][:300].replace('`', chr(39)).replace(chr(10), ' ')}`")
    for s in result.get("skipped", []):
        out.append(f"- skipped, {s['label']}: {s['reason']}")
    return out


def markdown(result: dict, source: str | None = None, plot: str | None = None) -> str:
    """The results section (without the markers)."""
    recs = result["records"]
    v = result.get("versions", {})
    vers = ", ".join(f"{k} {val}" for k, val in v.items() if val is not None)
    origin = f" from [{source}]({source})" if source else ""
    parts = [f"Results{origin}: {result.get('device', '?')}, "
             f"{result.get('date', '?')}; {vers}.", "",
             f"Protocol: {result.get('protocol', '?').rstrip('.')}.", "",
             "Entries are ms (speed-up); speed-up = cudnn-fp32 time / this time, both from this run "
             "(above 1: faster than cuDNN). † compares with cuDNN's plain LSTM of the same shape (cuDNN "
             "has no such cell)."]
    lines = summary(recs)
    if lines:
        parts += ["", *lines]
    for metric, what in METRICS:
        if any(_task(r) == "layer" for r in recs):
            parts += ["", f"#### {what} (ms)", "", layer_table(recs, metric)]
    lm = lm_table(recs)
    if lm:
        parts += ["", "#### Language-model training step (ms): NumPy backend on the CPU against the GPU", "",
                  "`step.train` (forward, BPTT, clipping, Adam), wall clock; GPU speed-up = CPU time / GPU time.",
                  "", lm]
    if plot:
        parts += ["", f"![time against streams S, LSTM H=512 T=100]({plot})"]
    bad = problems(result)
    if bad:
        parts += ["", "#### Errors and skipped jobs", "", *bad]
    if result.get("time_budget", {}).get("exceeded"):
        parts += ["", f"The time budget of {result['time_budget']['seconds']:g} s ran out; the skipped jobs "
                      f"above were not run."]
    return "\n".join(parts) + "\n"


def replace_section(text: str, section: str, name: str | None = None) -> str:
    """``text`` with everything between the markers (of section ``name``, or the unnamed ones)
    replaced by ``section`` (markers appended at the end when absent)."""
    begin, end = (BEGIN, END) if name is None else (f"<!-- results:{name} -->", f"<!-- /results:{name} -->")
    block = f"{begin}\n{section.rstrip()}\n{end}"
    if begin in text and end in text and text.index(begin) < text.index(end):
        return re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: block, text, count=1, flags=re.S)
    return text.rstrip() + ("\n\n" if text.strip() else "") + block + "\n"


def plot(result: dict, path: str, H: int = 512) -> int:
    """Write the PNG: ms against S (log-log), one line per implementation, LSTM H=``H`` T=100 one
    layer, forward and forward+backward panels. Returns the number of lines drawn."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullFormatter

    sel = [r for r in result["records"] if _task(r) == "layer" and r["cell"] == "lstm" and r["layers"] == 1
           and r["T"] == 100 and r["H"] == H and r["I"] == H and not r.get("error")]
    impls = [i for i in _order(IMPLS) if any(r["impl"] == i for r in sel)]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    lines = 0
    for ax, (metric, what) in zip(axes, reversed(METRICS)):
        for impl in impls:
            pts = sorted((r["S"], r[metric]) for r in sel if r["impl"] == impl and r.get(metric))
            if pts:
                ax.plot(*zip(*pts), marker="o", label=impl)
                lines += 1
        ax.set(xscale="log", yscale="log", xlabel="streams S (batch)", ylabel="ms per window", title=what)
        streams = sorted({r["S"] for r in sel})
        if streams:
            ax.set_xticks(streams, [str(s) for s in streams])
            ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: f"{v:g}" if f"{v:.1g}"[0] in "25" else ""))
        ax.grid(True, which="both", alpha=0.3)
        if not impls:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    if lines:
        axes[1].legend(fontsize=8)
    fig.suptitle(f"LSTM H={H}, T=100, 1 layer, float32 — {result.get('device', '?')}, {result.get('date', '?')}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Markdown tables and a plot from one benchmark results JSON.")
    ap.add_argument("results", help="a results JSON")
    ap.add_argument("--md", metavar="FILE", help="replace the section between the markers in FILE (else: stdout)")
    ap.add_argument("--plot", metavar="FILE.png", help="write the plot here")
    ap.add_argument("--section", metavar="NAME", help="with --md: the markers <!-- results:NAME --> instead")
    args = ap.parse_args(argv)
    try:
        with open(args.results) as f:
            result = json.load(f)
    except (OSError, json.JSONDecodeError) as exc:
        ap.error(f"{args.results}: {exc}")
    if not isinstance(result, dict) or not isinstance(result.get("records"), list) or not all(
            isinstance(r, dict) and {"impl", "cell", "S"} <= r.keys() for r in result["records"]):
        ap.error(f"{args.results}: not a benchmark results file (bench/run_all.py, bench/loop_sweep.py or "
                 f"rnngraph bench write them: an object whose 'records' hold cell, S, impl, ...)")
    for r in result["records"]:  # bench/loop_sweep.py: one rnngraph column per RNNGRAPH_LOOP setting
        if r.get("setting"):
            r["impl"] = f"{r['impl']} [{r['setting']}]"
    rel = lambda p: os.path.relpath(p, os.path.dirname(os.path.abspath(args.md)) if args.md else os.getcwd())
    if args.plot:
        n = plot(result, args.plot)
        print(f"wrote {args.plot} ({n} lines)", file=sys.stderr)
    section = markdown(result, source=rel(args.results), plot=args.plot and rel(args.plot))
    if not args.md:
        sys.stdout.write(section)
        return 0
    text = Path(args.md).read_text(encoding="utf-8") if os.path.exists(args.md) else ""
    Path(args.md).write_text(replace_section(text, section, args.section), encoding="utf-8")
    print(f"wrote {args.md}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
