"""tilesplash masks to TileTables: a plan of the mask as given, on its own token order."""

from __future__ import annotations

from functools import lru_cache

from .._attention import plan
from .._mask import Mask, as_mask
from .._checks import check_int
from .._tile_tables import TileTable


def check_masks(masks) -> tuple[tuple[Mask, ...], bool]:
    """(masks as a tuple, given as a per-head list)."""
    if isinstance(masks, (list, tuple)):
        if not masks:
            raise ValueError("masks: expected a mask or a non-empty list of masks (one per head)")
        return tuple(as_mask(m) for m in masks), True
    return (as_mask(masks),), False


def check_lengths(q_len, kv_len, block_q, block_kv):
    q_len = check_int(q_len, "q_len", 1)
    kv_len = q_len if kv_len is None else check_int(kv_len, "kv_len", 1)
    return q_len, kv_len, check_int(block_q, "block_q", 1), check_int(block_kv, "block_kv", 1)


@lru_cache(maxsize=256)
def mask_tiles(mask: Mask, q_len: int, kv_len: int, block_q: int, block_kv: int) -> TileTable:
    """The tiles of `mask` exactly as given (a temporal or sta mask on the
    original order, not the order tilesplash's own front door runs it in), zero-padded
    to whole blocks on both edges, as Splash reads them."""
    export = plan(mask, q_len, kv_len, block_q, block_kv, original_order=True).block_sparse()
    return TileTable.from_block_sparse(export).padded()
