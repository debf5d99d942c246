"""Inputs that require grad: forward always works, backward only where a kernel has one.

FlexAttention has a backward on GPUs (the BlockMask then carries its q-block
lists, compute_q_blocks), so the flex backend's CUDA output stays in the
graph. The native kernel has none, and FlexAttention refuses even a forward
on CPU tensors that require grad; there the forward runs under no_grad and the
output is tied to the inputs by `no_backward`, whose backward raises naming
the backend, rather than returning a detached output that would train
nothing without a word (issue 37, item 10; issue 34).
"""

from __future__ import annotations

import contextlib

import torch


def wants_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


class _NoBackward(torch.autograd.Function):
    @staticmethod
    def forward(ctx, who, out, *inputs):
        ctx.who = who
        return out.view_as(out)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(f"{ctx.who} has no backward (forward only); run it under "
                           f"torch.no_grad(), or on a CUDA tensor with backend='flex', whose "
                           f"FlexAttention has one")


def no_backward(out, who: str, *inputs):
    """out, in the graph of `inputs`, with a backward that raises naming `who`."""
    return _NoBackward.apply(who, out.detach(), *inputs)


def forward_only(refuse: bool):
    """torch.no_grad() where the output is made by no_backward, else nothing."""
    return torch.no_grad() if refuse else contextlib.nullcontext()
