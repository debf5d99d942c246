"""A tile plan as the tensors a FlexAttention BlockMask and its mask_mod read.

From TilePlan.block_sparse() (CSR lists per q-block and the deduplicated
bitmask table) this builds, once per (mask, lengths, block, window) and kept
in a small LRU cache:

- the block lists padded to [q_blocks, kv_blocks] int32, as
  BlockMask.from_kv_blocks takes them (partial tiles in kv_*, full tiles in
  full_kv_*; entries past a row's count are never read);
- a tile table [q_blocks, kv_blocks] int32: 0 empty, 1 full, 2 + id for a
  partial tile whose bitmask is `bits[id]`;
- the bitmask table as int32 words [distinct, block_q, 2 * words_per_row]:
  bit j of word w of row r keeps query q0 + r and key k0 + 32 w + j (the
  plan's uint64 words split in halves, low half first; int32 because every
  FlexAttention backend handles 32-bit integer shifts).
- where every row keeps at most ROW_INTERVALS runs of keys (bands, causal
  and local masks, sinks, text rows and columns), the rows as intervals
  [ROW_INTERVALS, q_len] int32 (TilePlan.row_intervals): what the cheaper
  per-row mask_mod of masks.py loads.

NumPy only: the device copies live in _flex.masks.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .. import _core
from .._window import window_core

FULL = 1
PARTIAL_BASE = 2
ROW_INTERVALS = 4
"""Intervals per row of the per-row mask_mod (a fixed count: one compiled kernel)."""


@dataclass(frozen=True)
class PlanTables:
    """One plan's block lists, tile table and bitmask words (host arrays)."""

    q_len: int
    kv_len: int
    block_q: int
    block_kv: int
    partial_num: np.ndarray  # int32 [q_blocks]
    partial_idx: np.ndarray  # int32 [q_blocks, kv_blocks]
    full_num: np.ndarray  # int32 [q_blocks]
    full_idx: np.ndarray  # int32 [q_blocks, kv_blocks]
    tiles: np.ndarray  # int32 [q_blocks, kv_blocks]
    words: np.ndarray  # int32 [distinct, block_q, 2 * words_per_row]
    kept_pairs: int
    build_seconds: float
    row_starts: np.ndarray | None = None  # int32 [ROW_INTERVALS, q_len], or None
    row_ends: np.ndarray | None = None

    @property
    def q_blocks(self) -> int:
        return int(self.tiles.shape[0])

    @property
    def kv_blocks(self) -> int:
        return int(self.tiles.shape[1])


def _padded_lists(offsets: np.ndarray, indices: np.ndarray, q_blocks: int, kv_blocks: int):
    counts = np.diff(offsets).astype(np.int32)
    padded = np.zeros((q_blocks, kv_blocks), dtype=np.int32)
    if indices.size:
        rows = np.repeat(np.arange(q_blocks), counts)
        columns = np.arange(indices.size) - offsets[rows]
        padded[rows, columns] = indices
    return counts, padded, (np.repeat(np.arange(q_blocks), counts) if indices.size else None)


def tables_from_arrays(arrays: dict, kept_pairs: int = -1, build_seconds: float = 0.0,
                       rows=None) -> PlanTables:
    """PlanTables from the dict TilePlan.block_sparse() returns (and, where the rows
    are few intervals, TilePlan.row_intervals()'s (starts, ends))."""
    q_blocks, kv_blocks = int(arrays["q_blocks"]), int(arrays["kv_blocks"])
    partial_num, partial_idx, partial_rows = _padded_lists(
        arrays["partial_offsets"], arrays["partial_indices"], q_blocks, kv_blocks)
    full_num, full_idx, full_rows = _padded_lists(
        arrays["full_offsets"], arrays["full_indices"], q_blocks, kv_blocks)
    tiles = np.zeros((q_blocks, kv_blocks), dtype=np.int32)
    if full_rows is not None:
        tiles[full_rows, arrays["full_indices"]] = FULL
    if partial_rows is not None:
        tiles[partial_rows, arrays["partial_indices"]] = PARTIAL_BASE + arrays["partial_ids"]
    bits = arrays["bits"]
    if sys.byteorder != "little":  # pragma: no cover - every supported platform is little-endian
        bits = bits.byteswap()
    words = np.ascontiguousarray(bits).view(np.int32).reshape(
        bits.shape[0], int(arrays["block_q"]), 2 * int(arrays["words_per_row"]))
    starts, ends = (None, None) if rows is None else rows
    return PlanTables(int(arrays["q_len"]), int(arrays["kv_len"]), int(arrays["block_q"]),
                      int(arrays["block_kv"]), partial_num, partial_idx, full_num, full_idx,
                      tiles, words, int(kept_pairs), float(build_seconds), starts, ends)


def empty_tables(q_len: int, kv_len: int, block_q: int, block_kv: int) -> PlanTables:
    """A plan that keeps no pair (a head that another call of the layer runs)."""
    q_blocks, kv_blocks = -(-q_len // block_q), -(-kv_len // block_kv)
    zeros = np.zeros((q_blocks, kv_blocks), dtype=np.int32)
    counts = np.zeros(q_blocks, dtype=np.int32)
    words = np.zeros((0, block_q, 2 * -(-block_kv // 64)), dtype=np.int32)
    no_rows = np.zeros((ROW_INTERVALS, q_len), dtype=np.int32)
    return PlanTables(q_len, kv_len, block_q, block_kv, counts, zeros, counts, zeros, zeros,
                      words, 0, 0.0, no_rows, no_rows)


_CACHE: OrderedDict = OrderedDict()
_CAPACITY = 64


def plan_tables(mask, q_len: int, kv_len: int, block_q: int, block_kv: int,
                window=(0, 0, 0, 0)) -> PlanTables:
    """The tables of `mask` (a tilesplash.Mask) planned exactly as given on the
    original order (a window of it when window[2] is not 0; window as
    _window.window_args returns it), cached; None: a plan that keeps nothing."""
    if mask is None:
        return empty_tables(q_len, kv_len, block_q, block_kv)
    key = (mask, q_len, kv_len, block_q, block_kv, tuple(window))
    found = _CACHE.get(key)
    if found is not None:
        _CACHE.move_to_end(key)
        return found
    # The core's plan of the mask exactly as given (original order), not the public
    # tilesplash.plan: the arguments were checked by the caller, and the flex layer sits
    # below the public face.
    plan = _core.plan(window_core(mask, q_len, kv_len, tuple(window)), q_len, kv_len, block_q,
                      block_kv, True)
    stats = plan.stats()
    tables = tables_from_arrays(plan.block_sparse(), stats["kept_pairs"], stats["build_seconds"],
                                plan.row_intervals(ROW_INTERVALS))
    _CACHE[key] = tables
    while len(_CACHE) > _CAPACITY:
        _CACHE.popitem(last=False)
    return tables


def clear_cache() -> None:
    _CACHE.clear()
