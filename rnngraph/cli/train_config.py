"""``rnngraph train``'s flags and the :class:`rnngraph.lm.LMConfig` they make: a new run's from
its flags and defaults, a resumed run's from its checkpoint with the flags it may change."""
from __future__ import annotations

import argparse
import os

from ..precision import PRECISIONS
from ..cellfile import canonical_cell, read_cell_source, split_cell
from ..lm import (DEFAULT_LR_FINAL, LR_SCHEDULES, CheckpointError, LMConfig, canonical_corpus, make_lr_schedule,
                  make_optimizer)
from .arguments import (CELL_ARG_HELP, CHUNK_HELP, CLIError, cell_arg, cell_args_given, chunk_choice, directory,
                        fraction, nonnegative_float, nonnegative_int, positive_float, positive_int, precision_flag,
                        probability)


#: --steps when not given (a resumed cosine run: the step its schedule ends at).
DEFAULT_STEPS = 1000
#: Defaults of the flags that a resumed run takes from its checkpoint when they are not given.
TRAIN_DEFAULTS = dict(cell="lstm", layers=1, hidden=128, embed=32, window=64, streams=32, level="char",
                      corpus="austen", seed=0, dtype="float32", max_words=None, optimizer="adam",
                      lr=2e-3, lr_schedule="constant", clip=1.0, dropout=0.0, tie_weights=False)


def _train_arguments(p: argparse.ArgumentParser) -> None:
    d = TRAIN_DEFAULTS
    g = p.add_argument_group("model (a resumed run takes these from the checkpoint)")
    g.add_argument("--cell", metavar="NAME|FILE.py:FUNCTION",
                   help=f"a standard cell (lstm, gru, peephole_lstm, ...) or file.py:function naming an "
                        f"@rg.cell function (default {d['cell']})")
    g.add_argument("--cell-arg", dest="cell_args", metavar="NAME=VALUE", type=cell_arg, action="append",
                   help=CELL_ARG_HELP + "; kept in the checkpoint, so --resume, sample and eval make the same cell")
    g.add_argument("--layers", metavar="L", type=positive_int, help=f"stacked cells (default {d['layers']})")
    g.add_argument("--hidden", metavar="H", type=positive_int,
                   help=f"hidden size of each cell (default {d['hidden']})")
    g.add_argument("--embed", metavar="E", type=positive_int,
                   help=f"embedding size (default {d['embed']}; with --tie-weights: --hidden)")
    g.add_argument("--tie-weights", action="store_true", default=None,
                   help="the output layer's weight is the embedding table, one parameter (Press & Wolf 2017; "
                        "PyTorch's word_language_model --tied); needs --embed equal to --hidden")
    g.add_argument("--chunk", metavar="N|auto|none", type=chunk_choice,
                   help=CHUNK_HELP + "; a resumed run may change it (default auto; a resumed run: the checkpoint's)")
    g.add_argument("--dtype", choices=("float32", "float64"), help=f"(default {d['dtype']})")
    g.add_argument("--precision", choices=PRECISIONS,
                   help="operand format of the once-per-window GEMMs (input products, weight gradients): fp32, "
                        "or tf32 / bf16 on tensor cores with fp32 accumulation (the recurrent products too where "
                        "streams x K >= 49,152 or streams >= 16 with K >= 1,024, K the widest recurrent product's inner dimension (hidden for the standard cells), or as RNNGRAPH_LOOP's mma=0/1 says; the CPU emulates it); --dtype float32 only; a resumed run "
                        "may change it (default fp32; "
                        "a resumed run: the checkpoint's)")
    g.add_argument("--seed", metavar="SEED", type=nonnegative_int,
                   help=f"parameter initialisation seed (default {d['seed']})")
    g = p.add_argument_group("data (a resumed run takes these from the checkpoint too)")
    g.add_argument("--corpus", "--text", dest="corpus", metavar="austen|FILE",
                   help="'austen' (Jane Austen's novels; train on five, validate and test on halves of "
                        f"Persuasion) or a UTF-8 text file (split 90/5/5 at word boundaries); --text FILE is the same; "
                        f"a resumed run takes it only where the checkpoint's file has moved (its new place) "
                        f"(default {d['corpus']})")
    g.add_argument("--level", choices=("char", "word"), help=f"tokens (default {d['level']})")
    g.add_argument("--max-words", metavar="N", type=positive_int,
                   help="word level: keep only the N most frequent word types of the training split, the rest "
                        "becoming <unk> (default: every word type; a word is a lowercased run of letters (with "
                        "apostrophes inside, as don't), "
                        "a punctuation mark, a digit or a newline: rnngraph/data/vocab.py)")
    g.add_argument("--window", metavar="T", type=positive_int,
                   help=f"timesteps per training step: truncated BPTT (default {d['window']})")
    g.add_argument("--streams", metavar="S", type=positive_int,
                   help=f"parallel streams, starting at evenly spaced offsets (default {d['streams']})")
    g = p.add_argument_group("optimisation")
    g.add_argument("--steps", metavar="N", type=nonnegative_int,
                   help="train until this many steps in total (a resumed run counts its old steps) "
                        f"(default {DEFAULT_STEPS}; a resumed run: the total it was last asked to train)")
    g.add_argument("--optimizer", choices=("adam", "adamw", "sgd"),
                   help=f"adamw: Adam with decoupled weight decay, as torch.optim.AdamW (default {d['optimizer']})")
    g.add_argument("--lr", metavar="LR", type=positive_float, help=f"learning rate (default {d['lr']})")
    g.add_argument("--lr-schedule", choices=LR_SCHEDULES,
                   help="cosine: from --lr down to --lr * --lr-final at step --steps (PyTorch's CosineAnnealingLR "
                        "over the total step count, so a resumed run given the same --steps continues the same "
                        f"curve); a resumed run may change it (default {d['lr_schedule']})")
    g.add_argument("--lr-final", metavar="F", type=fraction,
                   help="--lr-schedule cosine only: the last lr as a fraction of --lr, in [0, 1] "
                        f"(default {DEFAULT_LR_FINAL})")
    g.add_argument("--weight-decay", metavar="WD", type=nonnegative_float,
                   help="--optimizer adamw only: each step multiplies the parameters by 1 - lr*WD before the "
                        "Adam update (torch.optim.AdamW; Loshchilov & Hutter 2019); a resumed run may change "
                        "it (adamw's default 0.01; an error with adam or sgd)")
    g.add_argument("--clip", metavar="C", type=nonnegative_float,
                   help=f"global gradient-norm clip, 0 = off (default {d['clip']})")
    g.add_argument("--dropout", metavar="P", type=probability,
                   help="dropout probability on the non-recurrent connections (after the embedding, "
                        "between cells, before the softmax; Zaremba et al. 2014), training only; a resumed "
                        f"run may change it (default {d['dropout']:g}: none)")
    g.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto", help="(default auto)")
    g.add_argument("--time-limit", metavar="SECONDS", type=nonnegative_float, default=0,
                   help="stop early (validating and checkpointing as at the end) once training has run "
                        "this long; 0 = no limit (default 0)")
    g = p.add_argument_group("validation and checkpoints")
    g.add_argument("--eval-every", metavar="K", type=nonnegative_int, default=100,
                   help="validate every K steps and at the end; 0 = only at the end (default 100)")
    g.add_argument("--eval-streams", metavar="S", type=positive_int, default=32,
                   help="streams of the validation pass (default 32)")
    g.add_argument("--eval-tokens", metavar="N", type=nonnegative_int, default=0,
                   help="validate on the first N tokens of the validation split only; 0 = all of it "
                        "(default 0)")
    g.add_argument("--checkpoint", metavar="DIR", type=directory,
                   help="write config.json and params.npz here at each validation and at the end")
    g.add_argument("--checkpoint-every", metavar="K", type=nonnegative_int, default=None,
                   help="checkpoint every K steps (default: with each validation; 0: only at the end)")
    g.add_argument("--resume", action="store_true", help="continue the run saved in --checkpoint DIR")
    g = p.add_argument_group("several processes (data parallelism, under torchrun)")
    g.add_argument("--distributed", action="store_true",
                   help="one of the processes torchrun starts (torchrun --nproc-per-node N -m rnngraph train "
                        "--distributed ...): the --streams are split across them, the gradients all-reduced "
                        "(torch.distributed: gloo on the CPU; with --device cuda NCCL, GPU LOCAL_RANK a process); rank 0 "
                        "prints and checkpoints")
    g.add_argument("--distributed-timeout", metavar="SECONDS", type=positive_float,
                   help="--distributed only: how long a process waits for the others before failing (a "
                        "process that died; validation on rank 0 must take less) (default 300)")
    g = p.add_argument_group("output")
    g.add_argument("--show-schedule", action="store_true",
                   help="print the compiled schedule (the network graph where there is none) first")
    g.add_argument("--no-progress", action="store_true",
                   help="no progress bar (there is none either when stderr is not a terminal)")


def _check_weight_decay(args, optimizer: str) -> None:
    if args.weight_decay is not None and optimizer != "adamw":
        raise CLIError(f"--weight-decay applies to --optimizer adamw only (decoupled weight decay, "
                       f"torch.optim.AdamW), not {optimizer}")


def _check_lr_final(args, schedule: str) -> None:
    if args.lr_final is not None and schedule != "cosine":
        raise CLIError(f"--lr-final applies to --lr-schedule cosine only (the lr it ends at), not {schedule}")


def _config_from_args(args) -> LMConfig:
    d = {k: (getattr(args, k) if getattr(args, k) is not None else v) for k, v in TRAIN_DEFAULTS.items()}
    if d["max_words"] is not None and d["level"] != "word":  # refused rather than ignored
        raise CLIError(f"--max-words {d['max_words']} keeps the most frequent word types: it needs --level word "
                       f"(the tokens are {d['level']}s)")
    _check_weight_decay(args, d["optimizer"])
    _check_lr_final(args, d["lr_schedule"])
    if d["tie_weights"]:
        d["embed"] = d["hidden"] if args.embed is None else d["embed"]
        if d["embed"] != d["hidden"]:
            raise CLIError(f"--tie-weights makes the embedding table the output weight, so --embed ({d['embed']}) "
                           f"must equal --hidden ({d['hidden']})")
    precision = precision_flag(args.precision or "fp32", d["dtype"])
    optimizer = make_optimizer(d["optimizer"], d["lr"], args.weight_decay).config()
    source = read_cell_source(d["cell"])  # stored with the checkpoints (see rnngraph.cellfile)
    return LMConfig(cell=canonical_cell(d["cell"]), cell_source=source, cell_args=cell_args_given(args.cell_args),
                    layers=d["layers"], hidden=d["hidden"],
                    embed=d["embed"],
                    window=d["window"], streams=d["streams"], level=d["level"],
                    corpus=canonical_corpus(d["corpus"]), seed=d["seed"], dtype=d["dtype"],
                    max_words=d["max_words"], optimizer=optimizer,
                    clip=d["clip"] or None, dropout=d["dropout"],
                    lr_schedule=make_lr_schedule(d["lr_schedule"], args.lr_final), tie_weights=d["tie_weights"],
                    precision=precision)


def _moved(corpus: str) -> bool:
    """Whether a checkpoint's corpus is a file no longer there (a resumed run may name its new place)."""
    return corpus != "austen" and not os.path.exists(corpus)


def _mismatch(directory: str, flag: str, was, given) -> CheckpointError:
    """The error for a resumed run given ``flag`` with another value than its checkpoint's."""
    return CheckpointError(f"{directory}: the checkpoint was trained with {flag} {was}, not {given}: "
                           f"drop {flag} to resume it, or train into a new --checkpoint directory")


def _cell_arg_flags(cell_args: dict) -> str:
    """``cell_args`` as the command line gives them: ``--cell-arg alpha=0.5 --cell-arg act='tanh'``."""
    return " ".join(f"--cell-arg {k}={v!r}" for k, v in cell_args.items())


def _resumed_config(args, saved: LMConfig, directory: str) -> LMConfig:
    """The checkpoint's config, with lr/weight decay/lr schedule/clip/dropout overridden where given,
    and the corpus where the checkpoint's file has moved and --corpus names it; CheckpointError
    when a flag that fixes shapes or the data layout (or ``--cell-arg``) disagrees with it, and for ``--cell FILE`` of
    the checkpoint's own file edited since (a resumed run trains the source stored in it)."""
    canon = {"cell": canonical_cell, "corpus": canonical_corpus}
    for name in LMConfig.FIXED:
        given = getattr(args, name)
        if given is None:
            continue
        given = canon.get(name, lambda v: v)(given)
        if name == "corpus" and _moved(saved.corpus):  # its new place (another vocabulary is noted)
            continue
        path = (split_cell(given) or ("",))[0] if name == "cell" else ""  # a file cell's
        if path and given == saved.cell and saved.cell_source is not None and os.path.isfile(path) \
                and read_cell_source(given) != saved.cell_source:
            raise CheckpointError(
                f"{directory}: {path} has changed since the checkpoint was written, and a "
                f"resumed run trains the cell source stored in it: drop --cell to resume with that source, or "
                f"train the edited cell into a new --checkpoint directory")
        if given != getattr(saved, name):
            flag, was = "--" + name.replace("_", "-"), getattr(saved, name)
            if isinstance(was, bool):  # a switch: said as given or not
                raise CheckpointError(
                    f"{directory}: the checkpoint was trained {'with' if was else 'without'} {flag}: "
                    f"drop {flag} to resume it, or train into a new --checkpoint directory")
            was = "unset (every word type)" if was is None and name == "max_words" else was
            raise _mismatch(directory, flag, was, given)
    given = cell_args_given(args.cell_args)
    if args.cell_args and given != saved.cell_args:
        raise CheckpointError(f"{directory}: the checkpoint was trained with "
                              f"{_cell_arg_flags(saved.cell_args) or 'no --cell-arg'}, not {_cell_arg_flags(given)}: "
                              f"drop --cell-arg to resume it, or train into a new --checkpoint directory")
    cfg = LMConfig(**{**saved.to_json()})
    if args.corpus is not None and _moved(saved.corpus):
        cfg.corpus = canonical_corpus(args.corpus)
    if args.optimizer is not None and args.optimizer != saved.optimizer["name"]:
        raise _mismatch(directory, "--optimizer", saved.optimizer["name"], args.optimizer)
    _check_weight_decay(args, saved.optimizer["name"])
    if args.lr is not None:
        cfg.optimizer = {**cfg.optimizer, "lr": args.lr}
    if args.weight_decay is not None:
        cfg.optimizer = {**cfg.optimizer, "weight_decay": args.weight_decay}
    schedule = args.lr_schedule or saved.lr_schedule["name"]
    _check_lr_final(args, schedule)
    if args.lr_schedule is not None or args.lr_final is not None:  # an lr_final not given stays the saved one
        lr_final = args.lr_final if args.lr_final is not None else saved.lr_schedule.get("lr_final")
        cosine = schedule == "cosine"
        cfg.lr_schedule = make_lr_schedule(schedule, lr_final if cosine else None,
                                           saved.lr_schedule.get("steps") if cosine else None)
    if args.clip is not None:
        cfg.clip = args.clip or None
    if args.dropout is not None:
        cfg.dropout = args.dropout
    if args.precision is not None:
        cfg.precision = precision_flag(args.precision, cfg.dtype)
    return cfg

