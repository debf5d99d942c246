"""mask_info() and splash_attention(): tilesplash plans driving Splash's Pallas kernel.

Splash's kernel sees only a MaskInfo (block kinds, next-block indices,
deduplicated partial blocks). mask_info() builds it from tilesplash plans;
splash_attention() wraps it in a SplashAttentionKernel (forward only) and
adds what tilesplash's own kernel guarantees and Splash's does not:

- scale: q is multiplied by `scale` (default 1/sqrt(d), tilesplash's
  convention) before the kernel, which itself never scales (Splash's
  convention is 1: callers scale q). scale=1.0 is Splash's behaviour.
- lengths that are not multiples of the blocks: q, k, v are zero-padded to
  whole blocks, the padded keys are masked out by the plan (MaskInfo of the
  zero-padded mask) and the padded query rows are dropped from the output.
- rows that keep no key give 0 and lse = -inf (Splash would average the
  masked values or divide by zero).
- compensate=True: every key tile a q-block's plan skips is added through its
  keys' mean key and value, merged through Splash's lse (_compensation.py),
  as tilesplash.attention(compensate=True) does.
"""

from __future__ import annotations

import math
from functools import lru_cache, partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.tpu.splash_attention import splash_attention_kernel as _splash
from jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_mask_info import MaskInfo

from .._checks import check_bool
from ._compensation import compensate, pooled_tiles, skips_any, visited_tiles
from ._mask_info import build_mask_info
from ._plans import check_lengths, check_masks, mask_tiles

# Splash's kernel computes scores in float32 and fills masked ones with this.
MASK_VALUE = _splash.DEFAULT_MASK_VALUE
_LANES = 128  # Splash's key tiles are whole multiples of the TPU's 128 lanes


def mask_info(masks, q_len, kv_len=None, *, block_q, block_kv) -> MaskInfo:
    """Splash's forward MaskInfo of a tilesplash mask (or SPEC string) or of a
    per-head list of masks, over q_len x kv_len (default q_len) in tiles of
    block_q x block_kv, built from tilesplash plans with array operations.

    Equal to Splash's process_mask(MultiHeadMask(...), (block_q, block_kv))
    for the same mask given to Splash as a NumpyMask, entry for entry: one
    distinct mask gives the shrunk grid [1, q_blocks, widest row], several
    one [heads, q_blocks, kv_blocks] entry per head. Lengths that are not
    multiples of the blocks give the MaskInfo of the mask zero-padded to
    whole blocks. Masks apply to the indices as given (a temporal or sta mask
    on the original order). The arrays are read-only (they are cached).
    """
    masks, _ = check_masks(masks)
    return _mask_info(masks, *check_lengths(q_len, kv_len, block_q, block_kv))


@lru_cache(maxsize=16)  # a per-head MaskInfo at 302,400 tokens is tens of MB
def _mask_info(masks, q_len, kv_len, block_q, block_kv) -> MaskInfo:
    return build_mask_info([mask_tiles(m, q_len, kv_len, block_q, block_kv) for m in masks],
                           MaskInfo)


def splash_attention(masks, q_len, kv_len=None, *, block_q, block_kv, scale=None,
                     interpret=False, compensate=False) -> "SplashAttention":
    """A callable (q, k, v) -> out running Splash's Pallas kernel (forward)
    with the MaskInfo of `masks` (a mask for every head, or one per head).

    q: [heads, q_len, d]; k, v: [kv_heads, kv_len, d] / [kv_heads, kv_len,
    d_v] (heads a multiple of kv_heads), one float dtype; out: [heads, q_len,
    d_v] in q's dtype (float32 accumulation). scale: None is 1/sqrt(d), as
    tilesplash.attention; q is multiplied by it before the kernel (Splash
    itself does not scale; pass scale=1.0 for Splash's convention). block_kv
    must be a multiple of 128 and block_q of 8 (Splash's TPU tiles); lengths
    need not be multiples of them. interpret=True runs the kernel in Pallas'
    interpreter on any JAX backend (CPU tests). Forward only: no gradient.
    compensate=True adds every tile a q-block's plan skips (block_q x block_kv
    tiles of the mask as given) through its keys' mean key and value, merged
    through the log-sum-exp: tilesplash.attention(compensate=True)'s term
    (docs/jax.md, "Compensation"); a plan that skips nothing runs as without it.
    """
    masks, per_head = check_masks(masks)
    q_len, kv_len, block_q, block_kv = check_lengths(q_len, kv_len, block_q, block_kv)
    check_kernel_blocks(block_q, block_kv)
    check_bool(compensate, "compensate")
    info = _mask_info(masks, q_len, kv_len, block_q, block_kv)
    heads = len(masks) if per_head and len(set(masks)) > 1 else None
    visited = None
    if compensate:
        distinct = masks if heads is not None else masks[:1]
        visited = np.stack([visited_tiles(mask_tiles(m, q_len, kv_len, block_q, block_kv))
                            for m in distinct])
        if not skips_any(visited, None, kv_len, block_kv):
            visited = None  # nothing skipped: exactly the uncompensated call
    return SplashAttention(info, q_len, kv_len, block_q, block_kv, heads=heads, scale=scale,
                           interpret=interpret, visited=visited)


def check_kernel_blocks(block_q: int, block_kv: int) -> None:
    if block_kv % _LANES:
        raise ValueError(f"block_kv: Splash's kernel needs a multiple of {_LANES}, got {block_kv}")
    if block_q % 8:
        raise ValueError(f"block_q: Splash's kernel needs a multiple of 8, got {block_q}")


class SplashAttention:
    """Splash's forward kernel on one MaskInfo; call it as fn(q, k, v)."""

    def __init__(self, info: MaskInfo, q_len: int, kv_len: int, block_q: int, block_kv: int, *,
                 heads: int | None, scale, interpret: bool, visited=None):
        if scale is not None:
            if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating)) \
                    or not (math.isfinite(scale) and scale > 0):
                raise ValueError(f"scale: expected a finite float > 0 or None, got {scale!r}")
        if not isinstance(interpret, bool):
            raise TypeError(f"interpret: expected True or False, got {type(interpret).__name__}")
        self.mask_info = info
        self.q_len, self.kv_len = q_len, kv_len
        self.block_q, self.block_kv = block_q, block_kv
        self.heads = heads  # None: any number of heads share the mask
        self.scale = None if scale is None else float(scale)
        self.interpret = interpret
        # bool [heads | 1, q_blocks, kv_blocks] of the plan: compensation on (None: off,
        # or on with nothing skipped).
        self._visited = None if visited is None else jnp.asarray(visited)
        self._kernel = make_kernel(jax.tree_util.tree_map(jnp.asarray, info), block_q, block_kv,
                                   interpret)

    def __call__(self, q, k, v, *, return_lse=False):
        """out [heads, q_len, d_v]; with return_lse=True (out, lse), lse float32
        [heads, q_len], the natural log-sum-exp of the scaled scores."""
        self._check(q, k, v)
        scale = self.scale if self.scale is not None else 1.0 / math.sqrt(q.shape[-1])
        q_pad = -self.q_len % self.block_q
        kv_pad = -self.kv_len % self.block_kv
        out, lse = _forward(self._kernel, q, k, v, self._visited, scale=scale, q_pad=q_pad,
                            kv_pad=kv_pad, block_q=self.block_q, block_kv=self.block_kv)
        return (out, lse) if return_lse else out

    def _check(self, q, k, v):
        for name, x in (("q", q), ("k", k), ("v", v)):
            if not hasattr(x, "shape") or not hasattr(x, "dtype"):
                raise TypeError(f"{name}: expected a jax.Array, got {type(x).__name__}")
            if len(x.shape) != 3:
                raise ValueError(f"{name}: expected [heads, N, d], got shape {tuple(x.shape)}")
            if not jnp.issubdtype(x.dtype, jnp.floating):
                raise TypeError(f"{name}: expected a float dtype, got {x.dtype}")
        if k.dtype != q.dtype or v.dtype != q.dtype:
            raise TypeError(f"k, v: dtypes {k.dtype}, {v.dtype} do not match q ({q.dtype})")
        if q.shape[1] != self.q_len:
            raise ValueError(f"q: expected {self.q_len} rows (q_len), got shape {tuple(q.shape)}")
        if k.shape[1] != self.kv_len or v.shape[:2] != k.shape[:2]:
            raise ValueError(f"k, v: expected [kv_heads, {self.kv_len}, d] (kv_len), got shapes "
                             f"{tuple(k.shape)} and {tuple(v.shape)}")
        if k.shape[2] != q.shape[2]:
            raise ValueError(f"k: head dim {k.shape[2]} does not match q ({q.shape[2]})")
        if self.heads is not None and q.shape[0] != self.heads:
            raise ValueError(f"q: the per-head masks are for {self.heads} heads, got "
                             f"{q.shape[0]}")
        if k.shape[0] < 1 or q.shape[0] % k.shape[0]:
            raise ValueError(f"k: heads {k.shape[0]} must divide q's heads ({q.shape[0]})")


@partial(jax.jit, static_argnames=("scale", "q_pad", "kv_pad", "block_q", "block_kv"))
def _forward(kernel, q, k, v, visited, *, scale, q_pad, kv_pad, block_q, block_kv):
    q_len = q.shape[1]
    out, lse = kernel_output(kernel, jnp.pad(scaled(q, scale), ((0, 0), (0, q_pad), (0, 0))),
                             jnp.pad(k, ((0, 0), (0, kv_pad), (0, 0))),
                             jnp.pad(v, ((0, 0), (0, kv_pad), (0, 0))), q_len)
    if visited is None:
        return out, lse
    # Every key of the call is pooled (the padding is not a key); grouped q heads
    # share their kv head's means, as Splash maps head h to kv head h // group.
    keys, values, log_count = pooled_tiles(k, v, block_kv)
    group = q.shape[0] // k.shape[0]
    pooled = (jnp.repeat(keys, group, axis=0), jnp.repeat(values, group, axis=0), log_count)
    return compensate(q, out, lse, pooled, visited, scale, block_q)


def make_kernel(info: MaskInfo, block_q: int, block_kv: int, interpret: bool):
    """Splash's forward kernel (with its log-sum-exp) on a MaskInfo of jax arrays."""
    return _splash.SplashAttentionKernel(
        info, None, None, block_sizes=_splash.BlockSizes(block_q=block_q, block_kv=block_kv),
        is_mqa=False, save_residuals=True, mask_value=MASK_VALUE, attn_logits_soft_cap=None,
        residual_checkpoint_name=None, mask_function=None, interpret=interpret)


def scaled(q, scale: float):
    """q * scale in float32, back in q's dtype (Splash's kernel does not scale)."""
    return q if scale == 1.0 else (q.astype(jnp.float32) * scale).astype(q.dtype)


def kernel_output(kernel, q, k, v, q_len: int):
    """(out, lse) of the kernel on padded q, k, v: the first q_len rows, and 0 /
    -inf for rows that keep no key. Such a row ends with only masked scores
    (MASK_VALUE, or no visited tile at all): its lse is far below any real one."""
    out, (lse,) = kernel(q, k, v)
    kept = lse >= 0.5 * MASK_VALUE
    out = jnp.where(kept[..., None], out, 0).astype(out.dtype)
    lse = jnp.where(kept, lse, -jnp.inf)
    return out[:, :q_len], lse[:, :q_len]
