"""tilesplash.attention(..., backend="flex"): one masked attention through FlexAttention.

The mask is planned exactly as given on the original order (a window of it
for the window arguments), its BlockMask is cached, and the call returns
what the native kernel returns: out in q's layout and dtype, the float32 LSE.
"""

from __future__ import annotations

import torch

from .._layouts import from_bhnd, lse_to_layout, to_bhnd
from .._tensors import batch_heads_len
from .._torch_video.compensation import compensate_call
from .kernel import run_flex
from .masks import block_mask_for
from .tuning import kernel_options_for

DEFAULT_BLOCK = 128


FLEX_DEVICES = ("cuda", "cpu", "xpu", "hpu", "mps")
"""Device types FlexAttention runs on (PyTorch checks again)."""


def check_device(q) -> None:
    if q.device.type not in FLEX_DEVICES:
        raise ValueError(f"q: FlexAttention runs tensors on {', '.join(FLEX_DEVICES)} devices, "
                         f"got a tensor on device '{q.device}'")


def check_finite(q, k, v) -> None:
    """NaN or Inf in q, k or v is refused, naming the argument, as the native kernel does,
    without waiting for the device: torch._assert_async checks on the device (on the CPU
    it raises at once, here as ValueError; on a GPU it is a device-side assert, reported
    at the next synchronisation with the same message)."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        message = f"{name}: NaN or Inf in the input; expected finite values"
        try:
            torch._assert_async(torch.isfinite(x).all(), message)
        except RuntimeError as error:
            if message not in str(error):
                raise
            raise ValueError(message) from None


def check_shapes(qb, kb, vb) -> None:
    """[B, H, N, d] views: k and v match q's batch and heads, share N, k has q's d."""
    for name, x in (("k", kb), ("v", vb)):
        if tuple(x.shape[:2]) != tuple(qb.shape[:2]):
            raise ValueError(f"{name}: expected q's batch and heads {tuple(qb.shape[:2])}, got "
                             f"{tuple(x.shape[:2])} (as [batch, heads])")
    if vb.shape[2] != kb.shape[2]:
        raise ValueError(f"v: expected k's sequence length {kb.shape[2]}, got {vb.shape[2]}")
    if kb.shape[3] != qb.shape[3]:
        raise ValueError(f"k: expected q's head dim {qb.shape[3]}, got {kb.shape[3]}")


def blocks(block_q, block_kv) -> tuple[int, int]:
    return (DEFAULT_BLOCK if block_q is None else block_q,
            DEFAULT_BLOCK if block_kv is None else block_kv)


def flex_masked_attention(q, k, v, mask, layout, scale, block_q, block_kv, window,
                          compile=None, kernel_options=None, compensate=False):
    """Checked arguments in, (out in `layout`, lse) out; compensate: the tiles the plan
    skips added through their pooled keys (_torch_video/compensation.py)."""
    check_device(q)
    qb, kb, vb = (to_bhnd(x, layout) for x in (q, k, v))
    check_shapes(qb, kb, vb)
    q_len, kv_len = int(qb.shape[2]), int(kb.shape[2])
    if qb.numel() and kb.numel():
        check_finite(q, k, v)
    if q_len == 0 or kv_len == 0 or qb.shape[0] == 0 or qb.shape[1] == 0:
        out = q.new_zeros(tuple(q.shape[:-1]) + (v.shape[-1],))
        lse = torch.full(batch_heads_len(q, layout), float("-inf"), dtype=torch.float32,
                         device=q.device)
        return out, lse
    bq, bk = blocks(block_q, block_kv)
    block_mask = block_mask_for(mask, q_len, kv_len, bq, bk, q.device, window)
    if kernel_options is None:
        kernel_options = kernel_options_for(q.device, mask, q_len, kv_len, int(qb.shape[3]),
                                            q.dtype, (bq, bk))
    out, lse = run_flex(qb, kb, vb, block_mask, scale, compile=compile,
                        kernel_options=kernel_options)
    if compensate:
        out, lse = compensate_call(qb, kb, vb, out, lse, block_mask,
                                   scale if scale is not None else int(qb.shape[3]) ** -0.5)
    return from_bhnd(out, layout), lse_to_layout(lse, layout)
