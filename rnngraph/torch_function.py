"""The autograd side of :class:`rnngraph.torch.RNN`: a ``torch.autograd.Function`` over a
:class:`rnngraph.layer.CompiledRNN`, and the conversions between torch tensors and the arrays the
compiled RNN takes (CUDA tensors as they are, CPU tensors as NumPy views)."""
from __future__ import annotations

import numpy as np
import torch

from .arrays import array_kind


class CompiledFunction(torch.autograd.Function):
    """y, *h_T = f(x, *h0, *params) through a CompiledRNN; backward through its backward.

    h0 comes per graph state (``layer0.h``, ``layer1.h``, ...); h_T goes out per state argument
    of the cell, the layers stacked (nn.LSTM's (layers * depth, B, H)): ``groups`` lists each
    argument's graph states in layer order."""

    @staticmethod
    def forward(ctx, rnn, state_names, groups, masks, lengths, has_h0, x, *tensors):
        h0 = dict(zip(state_names, tensors[:len(state_names)])) if has_h0 else None
        y, h_T = rnn.forward(to_backend(x), to_backend_dict(h0), train=True, masks=to_backend_dict(masks),
                             copy_states=False, lengths=lengths)
        ctx.rnn, ctx.pending, ctx.state_names, ctx.groups = rnn, rnn.last, state_names, groups
        # outputs the loss does not use get None, not zeros: no zero tensors to make and add
        ctx.set_materialize_grads(False)
        ctx.has_h0 = has_h0
        # the backward reads x and the parameters' memory: saving them lets torch refuse a second
        # backward without retain_graph and a backward after an in-place change of them
        ctx.save_for_backward(x, *tensors)
        return (from_backend(y, x), *stack_states(h_T, groups, x))

    @staticmethod
    def backward(ctx, dy, *dh_T):
        if torch.is_grad_enabled():  # create_graph=True: a graph of the gradients is asked for
            raise RuntimeError("rnngraph.torch.RNN gives first-order gradients only: no double backward "
                               "(create_graph=True, gradient penalties, torch.autograd.gradgradcheck); "
                               "its compiled backward is not itself differentiable")
        rnn, like = ctx.rnn, ctx.saved_tensors[0]
        T, S = ctx.pending.plan.key[:2]
        if dy is None:
            dy = torch.zeros((T, S, rnn.graph.by_name[rnn.output].size), dtype=like.dtype, device=like.device)
        seeds = {}
        for names, d in zip(ctx.groups, dh_T):
            if d is not None:  # rows of layer k: [k * depth, (k + 1) * depth)
                for name, part in zip(names, d.chunk(len(names))):
                    seeds[name] = to_backend(part.contiguous())
        n = len(ctx.state_names) if ctx.has_h0 else 0
        wanted = ctx.needs_input_grad[6:7 + n]  # x and the initial states
        dx, dh0, dparams = rnn.backward(to_backend(dy.contiguous()), seeds, pending=ctx.pending,
                                        input_grads=any(wanted))
        grads_h0 = [from_backend(dh0[s], like) if dh0 is not None else None for s in ctx.state_names][:n]
        dparams = [from_backend(dparams[p.name], like) for p in rnn.graph.params]
        return (None, None, None, None, None, None, None if dx is None else from_backend(dx, like), *grads_h0,
                *dparams)


def to_backend(t):
    """A tensor as the compiled RNN takes it: CUDA tensors as they are, CPU ones as NumPy views."""
    if t is None or array_kind(t) != "host":
        return t
    return t.detach().numpy() if isinstance(t, torch.Tensor) else t


def to_backend_dict(d):
    return None if d is None else {k: to_backend(v) for k, v in d.items()}


def from_backend(a, like: torch.Tensor) -> torch.Tensor:
    return a if isinstance(a, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(a)).to(like.dtype)


def stack_states(h_T: dict, groups: list, like: torch.Tensor) -> list:
    """Per state argument, its layers' final states stacked (layers * depth, B, H): new tensors
    (h_T's entries may be views of the program's buffers)."""
    return [torch.cat([from_backend(h_T[name], like) for name in names]) for names in groups]


__all__ = ["CompiledFunction", "from_backend", "stack_states", "to_backend", "to_backend_dict"]
