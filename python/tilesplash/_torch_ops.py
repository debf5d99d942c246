"""The PyTorch op torch.ops.tilesplash.attention, registered on first use.

A torch.library custom op with a fake (meta) implementation: torch.compile
traces a model that calls tilesplash.attention into a graph with this op as
one opaque node whose output shapes come from the fake, and runs the real
kernel at run time, so compiled and eager give the same result. Imported only
when a torch tensor reaches tilesplash (or torch was imported before it).
`context` is a tilesplash.ThreadingContext's handle (0: none), since an op's
schema holds no Python objects.
"""

from __future__ import annotations

from typing import Optional

import torch

from ._kernel_call import run_attention
from ._mask import as_mask
from ._threading import from_handle
from ._checks import check_bool, check_precision
from ._tensors import batch_heads_len, check_layout, check_qkv, out_shape
from ._window import seq_len, window_args


@torch.library.custom_op("tilesplash::attention", mutates_args=(), device_types="cpu")
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: str, layout: str,
                 scale: Optional[float], block_q: Optional[int], block_kv: Optional[int],
                 threads: int, q_offset: int = 0, kv_offset: int = 0, q_total: int = 0,
                 kv_total: int = 0, context: int = 0,
                 precision: str = "default",
                 compensate: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    check_qkv(q, k, v, check_layout(layout))  # again: the op can be called directly
    window = _window(q, k, layout, q_offset, kv_offset, q_total, kv_total)
    return run_attention("torch", q, k, v, layout, as_mask(mask), scale, block_q, block_kv, threads,
                         window, from_handle(context), check_precision(precision),
                         check_bool(compensate, "compensate"))


@attention_op.register_fake
def _attention_fake(q, k, v, mask, layout, scale, block_q, block_kv, threads, q_offset=0,
                    kv_offset=0, q_total=0, kv_total=0, context=0, precision="default",
                    compensate=False):
    check_qkv(q, k, v, check_layout(layout))  # shape errors surface while tracing
    check_precision(precision)
    check_bool(compensate, "compensate")
    out = q.new_empty(out_shape(q, v))
    lse = q.new_empty(batch_heads_len(q, layout), dtype=torch.float32)
    return out, lse


def _window(q, k, layout, q_offset, kv_offset, q_total, kv_total):
    """The window arguments checked again (the op is public); a total of 0 means
    offset + length, as None does in attention()."""
    return window_args(seq_len(q, layout), seq_len(k, layout), q_offset, kv_offset,
                       q_total or None, kv_total or None)
