"""The GPU kernels the torch video runner's calls can run on, behind one small
interface (base.Kernel). Device-neutral: a kernel that is not FlexAttention's (a
Triton kernel of our own, FlashInfer's BSR) is a file here, not in _flex/.

Every kernel reads the same BlockMask (a tile plan's full and partial block lists
and its mask_mod) and returns (out, lse); `choose()` takes the first in KERNELS
that can run a call and names, for the report, the ones passed over and why.
Adding a kernel: one file here with a Kernel subclass, and its line below.
"""

from __future__ import annotations

from .base import Kernel, KernelRefused
from .flash import FlashKernel
from .triton import TritonKernel

KERNELS: tuple[Kernel, ...] = (
    FlashKernel(),   # FlashAttention-4 through FlexAttention, where installed
    TritonKernel(),  # FlexAttention's Triton template (inductor's C++ template on CPUs)
)
"""In order of preference; the last runs every call."""


def choose(block_mask, q, need_lse) -> tuple[Kernel, list]:
    """(the kernel that runs this call, [(kernel name, why not)] of those passed over)."""
    passed = []
    for kernel in KERNELS:
        reason = kernel.unavailable(block_mask, q, need_lse)
        if reason is None:
            return kernel, passed
        passed.append((kernel.name, reason))
    raise RuntimeError("tilesplash: no FlexAttention kernel can run this call: " + "; ".join(
        f"{name}: {why}" for name, why in passed))


__all__ = ["KERNELS", "Kernel", "KernelRefused", "choose"]
