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

All of it is a view of one _tile_tables.TileTable (the tile encoding the JAX
bridge reads too): `table` keeps it. NumPy only: the device copies live in
_flex.masks.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from .. import _core
from .._tile_tables import FULL, PARTIAL_BASE, TileTable
from .._window import window_core

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
    table: TileTable | None = None  # what every array above is a view of

    @property
    def q_blocks(self) -> int:
        return int(self.tiles.shape[0])

    @property
    def kv_blocks(self) -> int:
        return int(self.tiles.shape[1])


def flex_view(table: TileTable, kept_pairs: int = -1, build_seconds: float = 0.0, starts=None,
              ends=None) -> PlanTables:
    """The PlanTables (FlexAttention's lists and int32 words) of one TileTable."""
    tiles = table.matrix()
    partial_num, partial_idx = _lists(tiles, lambda t: t >= PARTIAL_BASE)
    full_num, full_idx = _lists(tiles, lambda t: t == FULL)
    bits = table.bits
    if sys.byteorder != "little":  # pragma: no cover - every supported platform is little-endian
        bits = bits.byteswap()
    words = np.ascontiguousarray(bits).view(np.int32).reshape(
        bits.shape[0], table.block_q, 2 * table.words)
    return PlanTables(table.q_len, table.kv_len, table.block_q, table.block_kv, partial_num,
                      partial_idx, full_num, full_idx, tiles, words, int(kept_pairs),
                      float(build_seconds), starts, ends, table)


def tables_from_arrays(arrays: dict, kept_pairs: int = -1, build_seconds: float = 0.0,
                       rows=None) -> PlanTables:
    """PlanTables from the dict TilePlan.block_sparse() returns (and, where the rows
    are few intervals, TilePlan.row_intervals()'s (starts, ends))."""
    starts, ends = (None, None) if rows is None else rows
    return flex_view(TileTable.from_block_sparse(arrays), kept_pairs, build_seconds, starts, ends)


def empty_tables(q_len: int, kv_len: int, block_q: int, block_kv: int) -> PlanTables:
    """A plan that keeps no pair (a head that another call of the layer runs)."""
    no_rows = np.zeros((ROW_INTERVALS, q_len), dtype=np.int32)
    return flex_view(TileTable.empty(q_len, kv_len, block_q, block_kv), 0, 0.0, no_rows, no_rows)


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


def _lists(tiles: np.ndarray, kind):
    """(counts int32 [q_blocks], indices int32 [q_blocks, kv_blocks]) of the tiles where
    kind(tiles) holds, ascending, padded with zeros (as _padded_lists gives them)."""
    chosen = kind(tiles)
    counts = chosen.sum(axis=1).astype(np.int32)
    # Stable sort puts each row's chosen columns first, in ascending order.
    order = np.argsort(~chosen, axis=1, kind="stable").astype(np.int32)
    padded = np.where(np.arange(tiles.shape[1])[None, :] < counts[:, None], order, 0)
    return counts, padded.astype(np.int32)


def _joined_rows(band: PlanTables, segment: PlanTables, offset: int):
    """Row intervals of the joined plan (segment intervals moved by `offset`), or (None,
    None) when a row would keep more than ROW_INTERVALS runs."""
    if band.row_starts is None or segment.row_starts is None:
        return None, None
    used = segment.row_ends > segment.row_starts
    starts = np.concatenate([band.row_starts, np.where(used, segment.row_starts + offset, 0)])
    ends = np.concatenate([band.row_ends, np.where(used, segment.row_ends + offset, 0)])
    nonempty = ends > starts
    if nonempty.sum(axis=0).max(initial=0) > ROW_INTERVALS:
        return None, None
    first = np.argsort(~nonempty, axis=0, kind="stable")[:ROW_INTERVALS]
    pick = lambda a: np.take_along_axis(a, first, axis=0).astype(np.int32)  # noqa: E731
    return pick(starts), pick(ends)


def joined_tables(band: PlanTables, segment: PlanTables) -> PlanTables:
    """One plan over the keys [band's keys, padding to a whole kv block, segment's keys]:
    a separate key segment (the first-frame sink of token-major heads) kept as tiles of
    the band's own plan, so one kernel call runs both instead of two merged through
    their LSEs. Same pairs as the two calls (a key in both counts twice, as the merge
    counted it). The padding keys are kept by no tile: a ragged last band block that the
    band's plan marks full becomes partial, its bits limited to the real keys."""
    if (band.q_len, band.block_q, band.block_kv) != (segment.q_len, segment.block_q,
                                                     segment.block_kv):
        raise ValueError("segment: expected the band's query length and blocks, got "
                         f"{(segment.q_len, segment.block_q, segment.block_kv)} against "
                         f"{(band.q_len, band.block_q, band.block_kv)}")
    offset = band.kv_blocks * band.block_kv
    table = TileTable.concat([band.table.padded(q=False), segment.table])
    starts, ends = _joined_rows(band, segment, offset)
    return flex_view(table, band.kept_pairs + segment.kept_pairs,
                     band.build_seconds + segment.build_seconds, starts, ends)
