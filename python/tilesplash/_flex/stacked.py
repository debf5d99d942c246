"""One BlockMask per call over plans stacked once, each head's plan picked on the device.

A routed layer (_torch_video/lanes.py) runs every head in each of its calls;
which plan a head runs is the router's choice, a device tensor the host never
reads. So the plans of a call's candidates are stacked once per shape (slot 0
keeps nothing), and each call's BlockMask gathers every head's slot from them:
a new routing choice is new data for the same compiled kernel.
"""

from __future__ import annotations

import torch
from torch.nn.attention.flex_attention import BlockMask

from .masks import device_tables, stacked_mask_mod
from .options import FULL_ONLY_TAG, MASK_MOD_TAG, NO_MASK

_COMPUTE_Q_BLOCKS = "compute_q_blocks" in BlockMask.from_kv_blocks.__code__.co_varnames
_LISTS = ("partial_num", "partial_idx", "full_num", "full_idx")


class LaneTables:
    """The stacked tables of one lane's call (one key length): slot 0 keeps nothing,
    slot 1 + i the plan of the lane's i-th member; built once, on one device."""

    def __init__(self, plans, q_len, kv_len, block, device):
        plans = [device_tables(None, q_len, kv_len, *block, (0, 0, 0, 0), device)] + plans
        self.q_len, self.kv_len, self.block = q_len, kv_len, block
        self.lists = {name: torch.stack([getattr(p, name) for p in plans]) for name in _LISTS}
        self.mask_mod, self.kind = stacked_mask_mod(plans, *block, q_len, device)
        self.full_only = all(not p.host.partial_num.any() for p in plans)

    def block_mask(self, slots, grad: bool) -> BlockMask:
        """The BlockMask of heads running plans `slots` (int64 [H] on the device).
        grad: also the q-block lists FlexAttention's backward reads."""
        lists = [self.lists[name][slots][None] for name in _LISTS]
        extra = {"compute_q_blocks": grad} if _COMPUTE_Q_BLOCKS else {}
        size = dict(BLOCK_SIZE=self.block, seq_lengths=(self.q_len, self.kv_len), **extra)
        block_mask = BlockMask.from_kv_blocks(*lists, mask_mod=self.mask_mod(slots), **size)
        setattr(block_mask, MASK_MOD_TAG, self.kind)
        if self.full_only:  # compiled calls run no mask_mod (masks.py)
            twin = BlockMask.from_kv_blocks(*lists, mask_mod=None, **size)
            setattr(twin, MASK_MOD_TAG, NO_MASK)
            setattr(block_mask, FULL_ONLY_TAG, twin)
        return block_mask
