"""``rnngraph train``'s memory check (rnngraph.memory's estimate, before anything is allocated):
what a run's training and validation steps need, and, when that is more than there is, which
size flags to lower: the one or two that, lowered, make it fit (``--embed 100000000 --hidden 8``:
--embed, where a fixed list named --hidden, --layers, --window and --streams but not it)."""
from __future__ import annotations

import dataclasses

from ..errors import GraphError
from ..lm import Evaluator, LMConfig, build_network, unit
from ..memory import Footprint, optimizer_slots
from .step_setup import _available, _footprint


def training_need(cfg: LMConfig, vocab_size: int, device: str, valid_tokens: int, eval_streams: int,
                  nets: tuple | None = None) -> Footprint:
    """What the training step of ``cfg`` and its validation step (``eval_streams`` streams over
    ``valid_tokens`` tokens, no dropout) need on ``device``. nets: the two networks where they
    are built already (training, validation); else they are built here (nothing is allocated)."""
    if nets is None:
        net = build_network(cfg, vocab_size)
        nets = (net, build_network(cfg, vocab_size, dropout=0.0) if cfg.dropout else net)
    T, S = Evaluator(nets[1], cfg.window, eval_streams).shape(valid_tokens)
    return (_footprint(nets[0], cfg.window, cfg.streams, cfg.dtype, device, True, optimizer_slots(cfg.optimizer))
            + _footprint(nets[1], T, S, cfg.dtype, device, False))


def sizes_words(cfg: LMConfig, vocab_size: int, eval_streams: int | None = None) -> str:
    """A run's sizes for the message: ``--hidden 8 --embed 4 --layers 1 --window 8 --streams 4
    with a vocabulary of 30 chars`` (``--eval-streams S`` before ``with`` where given)."""
    validation = f" --eval-streams {eval_streams}" if eval_streams is not None else ""
    return (f"--hidden {cfg.hidden} --embed {cfg.embed} --layers {cfg.layers} --window {cfg.window} --streams "
            f"{cfg.streams}{validation} with a vocabulary of {vocab_size:,} {unit(cfg.level)}s")


def lowering_advice(cfg: LMConfig, vocab_size: int, device: str, valid_tokens: int, eval_streams: int,
                    need: Footprint) -> str:
    """``lower --embed`` (or ``lower --embed and --hidden``): the one or two size flags of a new run
    that needs more memory than there is (``need``) which, lowered to their least (1; --max-words
    1), make it fit, found greedily (the one leaving the least first) and then pruned of those not
    needed; where it takes more than two of them (or a smaller network cannot be built), every
    size flag."""
    sizes = {"hidden": cfg.hidden, "embed": cfg.embed, "layers": cfg.layers, "window": cfg.window,
             "streams": cfg.streams, "eval_streams": eval_streams}
    if cfg.level == "word":
        sizes["max_words"] = vocab_size - 1  # the vocabulary: its word types and <unk>
    if cfg.tie_weights:
        del sizes["embed"]  # the embedding table is the output weight: lowered with --hidden
    host, gpu = _available(need)

    def over(lowered) -> float:
        """How many times the memory there is the run needs with the flags ``lowered`` at 1."""
        trial = {**sizes, **dict.fromkeys(lowered, 1)}
        vocab = min(vocab_size, trial["max_words"] + 1) if "max_words" in trial else vocab_size
        small = dataclasses.replace(cfg, **{k: v for k, v in trial.items() if k in ("hidden", "embed", "layers",
                                                                                   "window", "streams")})
        if cfg.tie_weights:
            small.embed = small.hidden
        if small.chunk is not None:
            small.chunk = min(small.chunk, vocab)
        n = training_need(small, vocab, device, valid_tokens, trial["eval_streams"])
        return max(n.host.total / host if host is not None else 0.0,
                   n.gpu.total / max(gpu, 1) if gpu is not None else 0.0)

    words = ", --max-words" if cfg.level == "word" else ""
    every = f"lower --hidden, --embed, --layers{words}, --window or --streams"
    try:
        chosen: list[str] = []
        while len(chosen) < 3:  # more than two: no flag or two take the memory, it is short for every size
            left = {name: over(chosen + [name]) for name, value in sizes.items() if name not in chosen and value > 1}
            if not left:
                return every
            best = min(left, key=left.get)
            chosen.append(best)
            if left[best] <= 1:
                break
        else:
            return every
        for name in chosen[:-1]:  # one chosen early may not be needed with those after it
            if over([c for c in chosen if c != name]) <= 1:
                chosen.remove(name)
    except (GraphError, ValueError, ArithmeticError):  # a cell that cannot be built that small
        return every
    if len(chosen) > 2:
        return every
    flags = ["--" + name.replace("_", "-") for name in chosen]
    return "lower " + (flags[0] if len(flags) == 1 else f"{', '.join(flags[:-1])} and {flags[-1]}")
