"""tilesplash plans as PyTorch FlexAttention BlockMasks, on any device.

    import tilesplash.flex
    bm = tilesplash.flex.block_mask("spatial:frames=21,height=30,width=52,density=0.25,sink",
                                    32760, device="cuda")
    options = tilesplash.flex.kernel_options(q, bm)   # Triton options that fit this GPU
    out = torch.compile(flex_attention)(q, k, v, block_mask=bm, kernel_options=options)

    out = tilesplash.attention(q_cuda, k_cuda, v_cuda, mask=spec)      # backend="auto": flex
    out = tilesplash.attention(q_cpu, k_cpu, v_cpu, mask=spec, backend="flex")

    tilesplash.flex.configure(strategy="per_head", compile=True)  # VideoAttention's runner
    with tilesplash.flex.configure(compile=False): ...            # restored on exit

A BlockMask holds a plan's structure (empty tiles absent, full tiles without
mask_mod, partial tiles with it) and a mask_mod exact on every pair, so eager
FlexAttention (which calls mask_mod everywhere) is exact too: per-row key
intervals where each row keeps a few runs of keys (bands, causal, sinks,
text), else the plan's tile table and deduplicated bitmask table. Building
one from a plan takes milliseconds where create_block_mask evaluates the mask
on every pair (bench/flex_plans.py). The table mask_mod gathers per pair,
which costs the Triton template shared memory: PyTorch's default kernel
options do not fit it on every GPU, so pass `kernel_options(q, bm)` when
calling FlexAttention directly (tilesplash's own calls choose them, and step
down when a GPU still refuses). docs/gpu.md describes the backend.
Importing this module imports torch.
"""

from __future__ import annotations

from ._flex.kernel import RECOMPILE_LIMIT, compiled_flex, run_flex
from ._flex.masks import (
    CACHE_BYTES,
    block_mask_for,
    cache_bytes,
    clear_caches as _clear_masks,
    set_cache_bytes,
    table_mask_mod,
)
from ._flex.tables import clear_cache as _clear_tables
from ._flex.options import (
    choices as _choices,
    device_limits as _device_limits,
    mask_mod_kind as _mask_mod_kind,
    used as _used,
)
from ._flex.tuning import CANDIDATES, cache_path, kernel_options_for, tune
from ._flex.settings import configure, current as settings
from ._mask import as_mask
from ._checks import FLEX_BLOCKS, check_int
from ._tensors import is_torch
from ._checks import check_blocks as _check_blocks
from ._window import window_args

__all__ = [
    "CANDIDATES",
    "RECOMPILE_LIMIT",
    "block_mask",
    "CACHE_BYTES",
    "cache_bytes",
    "cache_path",
    "clear_caches",
    "configure",
    "settings",
    "set_cache_bytes",
    "compiled_flex",
    "kernel_options",
    "kernel_options_for",
    "kernel_options_used",
    "run_flex",
    "table_mask_mod",
    "tune",
]


def block_mask(mask, q_len, kv_len=None, *, block_size=128, device=None, q_offset=0, kv_offset=0,
               q_total=None, kv_total=None, mask_mod="auto", heads=None):
    """A torch.nn.attention.flex_attention.BlockMask for a tilesplash mask.

    mask: a SPEC string or tilesplash.Mask (one BlockMask of shape [1, 1, ...]
    for every head), or a list of them, one per head ([1, H, ...]; heads with
    equal masks share one plan). The mask applies to the sequence indices as
    given (a temporal or sta mask on the original token order). q_len x kv_len
    (kv_len defaults to q_len); block_size: an int or (block_q, block_kv), 128 by
    default (a multiple of the Triton kernel's BLOCK_M / BLOCK_N on GPUs);
    device: where the BlockMask's tensors live (default: the CPU). The window
    arguments plan a window of a larger map, as tilesplash.attention's.
    mask_mod: "auto" (the per-row mask_mod where every row keeps at most 4 runs
    of keys — bands, causal, local, sinks, text — else the bitmask table),
    "rows" (ValueError where the rows do not allow it) or "table".
    heads: the heads of the q it will serve, when known: a per-head list of
    another length is refused here (run_flex refuses it in any case, on q's
    heads; torch's flex_attention would fail inside with an IndexError, or ignore
    the extra masks). Cached by (masks, lengths, block, window, device,
    mask_mod): asking again costs a dictionary look-up.
    """
    import torch

    per_head = isinstance(mask, (list, tuple))
    masks = [as_mask(m) for m in mask] if per_head else as_mask(mask)
    if per_head and not masks:
        raise ValueError("mask: expected a mask or a non-empty list of masks, got an empty list")
    if heads is not None:
        heads = check_int(heads, "heads", 1)
        if per_head and len(masks) != heads:
            raise ValueError(f"mask: a per-head list must hold one mask per head; got a list of "
                             f"{len(masks)} masks for {heads} heads")
    q_len = check_int(q_len, "q_len", 1)
    kv_len = q_len if kv_len is None else check_int(kv_len, "kv_len", 1)
    block_q, block_kv = _block_size(block_size)
    window = window_args(q_len, kv_len, q_offset, kv_offset, q_total, kv_total)
    device = torch.device("cpu") if device is None else torch.device(device)
    return block_mask_for(masks, q_len, kv_len, block_q, block_kv, device, window, per_head,
                          mask_mod)


def kernel_options(q, block_mask=None, *, block_size=128):
    """FlexAttention kernel_options that fit q's GPU for a tilesplash BlockMask (sized for
    its mask_mod: block_mask's kind, or the table's when None), q's head dim and dtype and
    the sparse block (block_mask's, else block_size); None off CUDA (nothing to choose).
    q: a torch tensor [..., d]. Calls through tilesplash choose these themselves."""
    if not is_torch(q):
        raise TypeError(f"q: expected a torch tensor (its device, head dim and dtype choose the "
                        f"options), got {type(q).__module__}.{type(q).__qualname__}")
    kind = _mask_mod_kind(block_mask)
    if block_mask is not None:
        block_size = tuple(int(b) for b in block_mask.BLOCK_SIZE)
    block = _block_size(block_size)
    return _choices(_device_limits(q.device), int(q.shape[-1]), q.element_size(), block, kind)[0]


def _block_size(block_size) -> tuple[int, int]:
    """(block_q, block_kv) of an int or a pair, by the flex backend's block rule
    (what tilesplash.attention(..., backend="flex") takes)."""
    if isinstance(block_size, (tuple, list)):
        if len(block_size) != 2:
            raise ValueError(f"block_size: expected an int or (block_q, block_kv), got "
                             f"{block_size!r}")
        pair = tuple(block_size)
    else:
        pair = (block_size, block_size)
    if None in pair:
        raise TypeError(f"block_size: expected an int or (block_q, block_kv), got {block_size!r}")
    try:
        return tuple(_check_blocks(*pair, FLEX_BLOCKS))
    except (TypeError, ValueError) as e:
        raise type(e)(f"block_size: {e}") from None


def kernel_options_used() -> list:
    """[(context, kernel_options)] of the compiled FlexAttention calls this process ran:
    context is (GPU name, head dim, dtype, mask_mod kind, sparse block); options the
    Triton options that ran there (None: PyTorch's own choice, e.g. on the CPU)."""
    return _used()


def clear_caches() -> None:
    """Forget every cached plan table and BlockMask (host and device)."""
    _clear_tables()
    _clear_masks()
