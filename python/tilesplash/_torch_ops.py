"""The PyTorch op torch.ops.tilesplash.attention, registered on first use.

A torch.library custom op with a fake (meta) implementation: torch.compile
traces a model that calls tilesplash.attention into a graph with this op as
one opaque node whose output shapes come from the fake, and runs the real
kernel at run time, so compiled and eager give the same result. Imported only
when a torch tensor reaches tilesplash (or torch was imported before it).
"""

from __future__ import annotations

from typing import Optional

import torch

from . import _core
from ._mask import as_mask
from ._tensors import batch_heads_len, out_shape, torch_desc
from ._window import window_core


@torch.library.custom_op("tilesplash::attention", mutates_args=(), device_types="cpu")
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: str, layout: str,
                 scale: Optional[float], block_q: Optional[int], block_kv: Optional[int],
                 threads: int, q_offset: int = 0, kv_offset: int = 0, q_total: int = 0,
                 kv_total: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    # The window arrives checked by attention(); q_total == 0: the whole map.
    out = torch.empty(out_shape(q, v), dtype=q.dtype)
    lse = torch.empty(batch_heads_len(q, layout), dtype=torch.float32)
    seq_axis = 1 if layout in ("bnhd", "hnd") else 2
    core_mask = window_core(as_mask(mask), q.shape[seq_axis], k.shape[seq_axis],
                            (q_offset, kv_offset, q_total, kv_total))
    _core.attention(torch_desc(q, "q"), torch_desc(k, "k"), torch_desc(v, "v"),
                    torch_desc(out, "out"), lse.data_ptr(), layout, core_mask, scale,
                    block_q, block_kv, threads, True)
    return out, lse


@attention_op.register_fake
def _attention_fake(q, k, v, mask, layout, scale, block_q, block_kv, threads, q_offset=0,
                    kv_offset=0, q_total=0, kv_total=0):
    out = q.new_empty(out_shape(q, v))
    lse = q.new_empty(batch_heads_len(q, layout), dtype=torch.float32)
    return out, lse
