"""Dense work on torch's scaled_dot_product_attention (cuDNN or flash on a GPU): warm-up
layers and steps and force="dense", which a BlockMask kernel would run slower. Not in
KERNELS: the runner calls it for dense work only, where no plan exists."""

from __future__ import annotations

import torch


def dense(q, k, v, scale, key_limit=None):
    """Every head dense ([B, H, N, d]), keys from key_limit on dropped (a boolean mask)."""
    keep = None
    if key_limit is not None:
        keep = (torch.arange(int(k.shape[2]), device=q.device) < key_limit)[None]  # every row
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep, scale=scale)
