"""FlashAttention-4 through FlexAttention (`kernel_options={"BACKEND": "FLASH"}`,
PyTorch >= 2.10 with flash-attn-4 installed by the user: DESIGN.md §11).

Used where it is importable, on CUDA tensors, for a BlockMask of full tiles only
(granularity="tile": no mask_mod, which FA4's block-sparse path reads as dense before
PyTorch's June 2026 fix) and no LSE asked for; every other call, and a call FA4
refuses, falls back to the Triton template, and the report names why.
"""

from __future__ import annotations

import importlib.util
import warnings

import torch
from torch.nn.attention.flex_attention import flex_attention

from ..._flex.kernel import compiled_flex
from ..._flex.options import FULL_ONLY_TAG
from .base import Kernel, KernelRefused

OPTIONS = {"BACKEND": "FLASH"}


def _installed() -> str | None:
    """Why FA4 cannot serve this process (None: it can)."""
    try:
        found = importlib.util.find_spec("flash_attn.cute") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return "flash_attn.cute (flash-attn-4) is not installed"
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    if (major, minor) < (2, 10):
        return f"PyTorch {torch.__version__} predates FlexAttention's FLASH backend (2.10)"
    return None


class FlashKernel(Kernel):
    name = "flash"

    def __init__(self):
        self._why: str | None = None
        self._checked = False
        self._refused: str | None = None

    def unavailable(self, block_mask, q, need_lse):
        if not self._checked:
            self._why, self._checked = _installed(), True
        if self._why is not None:
            return self._why
        if self._refused is not None:
            return self._refused
        if q.device.type != "cuda":
            return f"runs CUDA tensors, got {q.device.type}"
        if need_lse:
            return "the call needs the LSE"
        if getattr(block_mask, FULL_ONLY_TAG, None) is None:
            return "the BlockMask has partial tiles (a mask_mod)"
        return None

    def run(self, q, k, v, block_mask, scale, *, compile, need_lse, kernel_options):
        twin = getattr(block_mask, FULL_ONLY_TAG)
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="flex_attention called without")
                function = compiled_flex(q.device.type, OPTIONS) if compile is not False \
                    else flex_attention
                return function(q, k, v, block_mask=twin, scale=scale,
                                kernel_options=dict(OPTIONS)), None
        except Exception as error:  # noqa: BLE001 - refused: Triton from now on, named
            self._refused = f"refused: {type(error).__name__}: {str(error)[:160]}"
            raise KernelRefused(self._refused) from error
