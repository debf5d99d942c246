"""One FlexAttention call: eager or compiled, with the LSE, on [B, H, N, d] views.

Compiled FlexAttention (Triton on GPUs, the inductor C++ template on CPUs)
skips empty tiles and calls mask_mod only in partial ones (a BlockMask with
no partial tile runs compiled with no mask_mod at all, options.FULL_ONLY_TAG); eager
FlexAttention is PyTorch's unfused reference, which materialises the scores
and calls mask_mod on every pair. `compile=None` (the default) compiles on
every device but the CPU, where eager keeps tests and small calls free of
compile time; compile=True forces it there too.

On a GPU the kernel options (Triton's tile, stages, warps) are chosen to fit
the device when the caller gives none, and a compile the GPU refuses for
resources steps down to the next choice instead of failing (options.py).

The compiled function is made once per (device type, kernel options) and
dynamo keeps one graph per input shape, dtype and block size (the BlockMask's
tables are padded to powers of two, so a new mask of the same lengths seldom
recompiles); the recompile limit is raised to `RECOMPILE_LIMIT` once, since
a video model meets many shapes (layers of several resolutions, batch sizes)
and dynamo's default would fall back to the eager reference silently.
"""

from __future__ import annotations

import math
import warnings

import torch
from torch.nn.attention import flex_attention as _flex_module
from torch.nn.attention.flex_attention import flex_attention

from .options import (
    FULL_ONLY_TAG,
    check_options,
    choices,
    device_limits,
    first_that_runs,
    mask_mod_kind,
)

RECOMPILE_LIMIT = 256

_AUX = getattr(_flex_module, "AuxRequest", None)
_compiled: dict = {}
_limit_raised = False


def _raise_recompile_limit() -> None:
    global _limit_raised
    if _limit_raised:
        return
    config = torch._dynamo.config
    for name in ("recompile_limit", "cache_size_limit"):
        if hasattr(config, name) and getattr(config, name) < RECOMPILE_LIMIT:
            setattr(config, name, RECOMPILE_LIMIT)
    if hasattr(config, "accumulated_recompile_limit"):
        config.accumulated_recompile_limit = max(config.accumulated_recompile_limit,
                                                 4 * RECOMPILE_LIMIT)
    elif hasattr(config, "accumulated_cache_size_limit"):
        config.accumulated_cache_size_limit = max(config.accumulated_cache_size_limit,
                                                  4 * RECOMPILE_LIMIT)
    _limit_raised = True


def _options_key(kernel_options) -> tuple:
    return tuple(sorted((kernel_options or {}).items()))


def compiled_flex(device_type: str, kernel_options=None):
    """torch.compile(flex_attention) for one device type and kernel options, made once."""
    key = (device_type, _options_key(kernel_options))
    found = _compiled.get(key)
    if found is None:
        _raise_recompile_limit()
        found = _compiled[key] = torch.compile(flex_attention, dynamic=False, fullgraph=True)
    return found


def use_compile(compile, device) -> bool:
    if compile is None:
        return torch.device(device).type != "cpu"
    return bool(compile)


def check_heads(block_mask, heads: int) -> None:
    """A BlockMask of per-head masks serves exactly that many heads: FlexAttention
    would index past a shorter list (an IndexError deep inside) and ignore a longer
    one's extra masks."""
    planned = int(block_mask.kv_num_blocks.shape[1])
    if planned not in (1, heads):
        raise ValueError(f"block_mask: a per-head list of {planned} masks for {heads} heads "
                         f"of q; expected one mask per head (or one mask for every head)")


def _candidates(q, block_mask, kernel_options, mask_mod):
    """(kernel options to try in order, the context their refusals are remembered under)."""
    limits = device_limits(q.device)
    if limits is None:  # the CPU's C++ template: nothing to fit
        return [kernel_options], (q.device.type,)
    block = tuple(int(b) for b in block_mask.BLOCK_SIZE)
    head_dim = int(q.shape[-1])
    ladder = choices(limits, head_dim, q.element_size(), block, mask_mod)
    if kernel_options is not None:
        ladder = [kernel_options] + [o for o in ladder if o != kernel_options]
    return ladder, (limits.name, head_dim, str(q.dtype), mask_mod, block)


def _call(function, q, k, v, block_mask, scale, kernel_options, return_lse):
    extra = {"kernel_options": dict(kernel_options)} if kernel_options else {}
    with warnings.catch_warnings():
        # Eager is chosen on purpose (the CPU's reference path); its advice to compile is noise.
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
        warnings.filterwarnings("ignore", message="return_lse is deprecated")
        if not return_lse:
            return function(q, k, v, block_mask=block_mask, scale=scale, **extra), None
        if _AUX is not None:
            out, aux = function(q, k, v, block_mask=block_mask, scale=scale,
                                return_aux=_AUX(lse=True), **extra)
            lse = aux.lse
        else:  # pragma: no cover - PyTorch before AuxRequest
            out, lse = function(q, k, v, block_mask=block_mask, scale=scale, return_lse=True,
                                **extra)
    return out, lse.float()


def run_flex(q, k, v, block_mask, scale, *, compile=None, kernel_options=None, return_lse=True,
             mask_mod=None, fallback=True):
    """FlexAttention of [B, H, Nq, d] q and [B, H, Nk, d] k, v under `block_mask`.

    Returns (out [B, H, Nq, dv] in q's dtype, lse float32 [B, H, Nq], natural
    log; rows that keep no key give 0 and -inf); lse is None with
    return_lse=False. Empty lengths are answered here (FlexAttention refuses
    them). PyTorch's compiled CPU template has no LSE output: a CPU call that
    needs it runs eager. On a GPU, kernel_options None chooses options that fit
    the device for `mask_mod` (options.TABLE: a mask_mod that gathers per pair;
    options.INDEX: one computed from indices or per-row loads; None: what the
    BlockMask says it runs, options.mask_mod_kind), and given options the GPU
    refuses for resources are replaced by the next that fits, with a warning
    (fallback=False: exactly these options or the error, as the tuner times them).
    """
    if q.device.type == "cpu" and not torch.is_grad_enabled():
        # FlexAttention refuses CPU tensors that require grad even with no graph to build.
        q, k, v = q.detach(), k.detach(), v.detach()
    batch, heads, q_len = (int(s) for s in q.shape[:3])
    kv_len, dv = int(k.shape[2]), int(v.shape[3])
    kernel_options = check_options(kernel_options)
    check_heads(block_mask, heads)
    if q_len == 0 or kv_len == 0 or batch == 0 or heads == 0:
        out = q.new_zeros((batch, heads, q_len, dv))
        lse = torch.full((batch, heads, q_len), -math.inf, dtype=torch.float32, device=q.device)
        return out, lse if return_lse else None
    compiled = use_compile(compile, q.device) and not (return_lse and q.device.type == "cpu")
    if not compiled:
        return _call(flex_attention, q, k, v, block_mask, scale, kernel_options, return_lse)
    # Full tiles only (a tile-granular plan): the compiled kernel runs no mask_mod.
    block_mask = getattr(block_mask, FULL_ONLY_TAG, block_mask)
    if mask_mod is None:
        mask_mod = mask_mod_kind(block_mask)
    candidates, context = _candidates(q, block_mask, kernel_options, mask_mod)
    if not fallback and kernel_options is not None:
        candidates = candidates[:1]
    return first_that_runs(
        lambda options: _call(compiled_flex(q.device.type, options), q, k, v, block_mask, scale,
                              options, return_lse),
        candidates, context, warn_first=kernel_options is not None)
