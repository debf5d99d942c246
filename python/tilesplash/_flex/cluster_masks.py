"""svg2's FlexAttention BlockMask: a call's cluster tiles and a mask_mod over cluster ranks.

The torch runner (_torch_video/clusters.py) computes, on the device, each head's
cluster rank of every run-order row and key, the kept cluster pairs and the
tile lists; this is what FlexAttention reads of them. The mask_mod reads the
head's ranks and kept-pair table instead of a bitmask table: svg2's partial
tiles are too many and too varied to deduplicate.
"""

from __future__ import annotations

import torch
from torch.nn.attention.flex_attention import BlockMask

_HAS_Q_BLOCKS = "compute_q_blocks" in BlockMask.from_kv_blocks.__code__.co_varnames


def cluster_block_mask(lists, q_rank, k_rank, compact, key_limit: int, tokens: int,
                       block) -> BlockMask:
    """lists: (partial_num, partial_idx, full_num, full_idx) [1, H, ...] int32; q_rank,
    k_rank: [H, N] compact cluster rank of each run-order row and key (-1: text, kept
    whole); compact: uint8 [H, qc, kc] kept cluster pairs; keys from key_limit on are
    padding. In grad mode the BlockMask carries the q-block lists a backward reads."""
    q_rank32, k_rank32 = q_rank.to(torch.int32), k_rank.to(torch.int32)
    # A tensor, not a constant: a compiled kernel serves every key length.
    real_keys = torch.tensor(key_limit, dtype=torch.int32, device=q_rank.device)

    def mask_mod(b, h, q_idx, kv_idx):
        a, c = q_rank32[h, q_idx], k_rank32[h, kv_idx]
        pair = compact[h, torch.clamp(a, min=0), torch.clamp(c, min=0)]
        return ((a < 0) | (c < 0) | (pair != 0)) & (kv_idx < real_keys)

    extra = {"compute_q_blocks": torch.is_grad_enabled()} if _HAS_Q_BLOCKS else {}
    return BlockMask.from_kv_blocks(*lists, BLOCK_SIZE=tuple(block), mask_mod=mask_mod,
                                    seq_lengths=(tokens, tokens), **extra)
