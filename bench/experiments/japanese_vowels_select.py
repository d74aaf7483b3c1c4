#!/usr/bin/env python3
"""Choose examples/japanese_vowels.py's settings on a validation split, then measure the test set.

Runs the example with ``--val 0.2`` (a fifth of the training set held out, stratified, fixed
seed; the test set unseen) for every combination of ``--hidden``, ``--lr`` and ``--epochs``
given, two seeds each; takes the combination with the best mean validation accuracy (ties: the
cheaper, fewer epochs then smaller hidden); trains it on the whole training set with seeds 0, 1, 2
and reports the test accuracies. Writes every run and the choice to ``--out`` (JSON).

    python3 bench/experiments/japanese_vowels_select.py --out results.json
"""
import argparse
import importlib.util
import itertools
import json
import os
import sys
import tempfile

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "japanese_vowels.py")


def _example():
    spec = importlib.util.spec_from_file_location("japanese_vowels", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(args: list[str]) -> dict:
    """The example's JSON result for ``args``, run in this process (its kernels compile once)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "result.json")
        _example().main([*args, "--out", path])
        with open(path) as f:
            return json.load(f)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--hidden", nargs="+", default=["64", "128"])
    ap.add_argument("--lr", nargs="+", default=["3e-3", "1e-2"])
    ap.add_argument("--epochs", nargs="+", default=["60", "150"])
    ap.add_argument("--bidirectional", action="store_true", help="bidirectional LSTMs (default: one direction)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    trials, bi = [], ["--bidirectional" if args.bidirectional else "--no-bidirectional"]
    for hidden, lr, epochs in itertools.product(args.hidden, args.lr, args.epochs):
        r = run(["--val", "0.2", "--seeds", "0", "1", "--hidden", hidden, "--lr", lr, "--epochs", epochs, *bi])
        trials.append(r)
        print(f"hidden {hidden:>4s} lr {lr:>5s} epochs {epochs:>4s}: validation {r['mean']:.4f} {r['accuracy']}", flush=True)
    best = max(trials, key=lambda r: (r["mean"], -r["epochs"], -r["hidden"]))
    final = run(["--seeds", "0", "1", "2", "--hidden", str(best["hidden"]), "--lr", str(best["lr"]),
                 "--epochs", str(best["epochs"]), *bi])
    print(f"chosen hidden {best['hidden']} lr {best['lr']} epochs {best['epochs']}: test {final['accuracy']} "
          f"mean {final['mean']:.4f}", flush=True)
    with open(args.out, "w") as f:
        json.dump({"selection": "best mean validation accuracy (--val 0.2, seeds 0 and 1)", "trials": trials,
                   "chosen": {k: best[k] for k in ("hidden", "lr", "epochs")}, "test": final}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
