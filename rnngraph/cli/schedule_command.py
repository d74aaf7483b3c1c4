"""``rnngraph schedule``: print (or write) the schedule of a stacked network of a cell."""
from __future__ import annotations

import argparse
import os
import sys

from ..cellfile import bind_cell_args, resolve_cell
from ..precision import PRECISIONS
from .arguments import CELL_ARG_HELP, CLIError, cell_arg, cell_args_given, positive_int, precision_flag, probability


FORMATS = ("text", "json", "dot", "gantt")


def _schedule_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("cell", metavar="CELL", nargs="?", default=None,
                   help="a standard cell name or file.py:function (or --cell, as train takes it)")
    p.add_argument("--cell", dest="cell_flag", metavar="CELL", default=None, help="the same as CELL")
    p.add_argument("--cell-arg", dest="cell_args", metavar="NAME=VALUE", type=cell_arg, action="append",
                   help=CELL_ARG_HELP)
    p.add_argument("--layers", type=positive_int, default=1, help="stacked cells (default 1)")
    p.add_argument("--hidden", type=positive_int, default=512, help="hidden size H (default 512)")
    p.add_argument("--window", type=positive_int, default=100, help="timesteps T per window (default 100)")
    p.add_argument("--streams", type=positive_int, default=1, help="parallel streams S (default 1)")
    p.add_argument("--input-size", type=positive_int, default=None, help="float inputs of this size (default: hidden)")
    p.add_argument("--vocab", type=positive_int, default=None,
                   help="a language model: Embedding(vocab) first and a softmax head last")
    p.add_argument("--dropout", metavar="P", type=probability, default=0.0,
                   help="rg.stacked(..., dropout=P): Dropout layers between cells (and, with --vocab, after "
                        "the embedding and before the head) (default 0: none)")
    p.add_argument("--plan", choices=("wavefront", "scc-sequential", "naive"), default=None,
                   help="force a plan (default: the cost model chooses; naive: one kernel per op per timestep)")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32", help="(default float32)")
    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="operand format of the once-per-window GEMMs (and of the loops' products where "
                        "streams x K >= 49,152 or streams >= 16 with K >= 1,024, K the widest recurrent product's inner "
                        "dimension (hidden for the standard cells), or with RNNGRAPH_LOOP=mma=1): fp32, or tf32 / bf16 on "
                        "tensor cores with fp32 accumulation (each GEMM line then names its format) (default fp32)")
    p.add_argument("--format", choices=FORMATS, default="text", help="(default text)")
    p.add_argument("--out", default=None,
                   help="write here instead of stdout (required for gantt: an image, PNG, PDF, SVG, ... by its extension)")


def run_schedule(args) -> int:
    """Print (or write) the schedule of a stacked network of CELL."""
    import json

    from ..loop_env import from_environment, resolve
    from ..network import stacked
    from ..passes import schedule
    from ..passes.recurrence import recurrent_width
    from ..schedule_export import gantt, to_dot, to_json

    if args.cell is None and args.cell_flag is None:
        raise CLIError("no cell given: rnngraph schedule CELL (a standard cell's name or file.py:function)")
    if args.cell is not None and args.cell_flag is not None:
        raise CLIError(f"give the cell once: rnngraph schedule CELL or rnngraph schedule --cell CELL "
                       f"(got {args.cell!r} and --cell {args.cell_flag!r})")
    folder = os.path.dirname(args.out) if args.out else ""
    if folder and not os.path.isdir(folder):
        raise CLIError(f"--out {args.out}: no folder {folder}")
    spec = args.cell or args.cell_flag
    factory = bind_cell_args(resolve_cell(spec, flag="CELL" if args.cell else "--cell"), spec,
                             cell_args_given(args.cell_args))
    net = stacked(factory, args.layers, args.hidden, input_size=args.input_size, vocab=args.vocab,
                  dropout=args.dropout)
    precision = precision_flag(args.precision, args.dtype)
    options, tuning = resolve(args.streams, overrides=from_environment(),  # RNNGRAPH_LOOP's keys
                              recurrent_width=recurrent_width(net.graph), precision=precision)
    s = schedule(net.graph, args.window, args.streams, args.dtype, args.plan, options, precision=precision)
    if args.format == "gantt":
        if not args.out:
            raise CLIError("--format gantt writes an image: give --out FILE.png (or .pdf, .svg)")
        try:
            gantt(s, args.out)
        except ValueError as exc:  # matplotlib's "Format 'txt' is not supported (supported formats: ...)"
            raise CLIError(f"--out {args.out}: {exc}") from None
        print(f"wrote {args.out}")
        return 0
    shape = tuning.changed(args.streams)  # the loop kernels' code shape, which the schedule does not hold
    tail = (f"loop code shape (RNNGRAPH_LOOP; not the defaults for S={args.streams}): "
            + ", ".join(f"{k}={v}" for k, v in shape.items()) + "\n") if shape else ""
    text = {"text": lambda: str(s) + tail,
            "json": lambda: json.dumps({**to_json(s), "loop_code_shape_changed": shape}, indent=1) + "\n",
            "dot": lambda: to_dot(s)}[args.format]()
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0
