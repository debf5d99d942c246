"""Splash's forward MaskInfo from tilesplash TileTables, with no loop over blocks.

Splash's process_mask walks every block of every distinct mask in Python and
evaluates the mask on it. The same information is already in a tilesplash
plan, so here it is rearranged with NumPy array operations into exactly what
process_mask returns for the forward pass (head_shards = q_seq_shards = 1,
downcast_smem_data = True):

- one distinct mask: the grid is shrunk to the non-empty tiles of each row
  (block_mask, data_next, mask_next of shape [1, q_blocks, widest row]);
- several: one [heads, q_blocks, kv_blocks] entry per head, where an empty
  block points at the next non-empty one in (head, row, column) order,
  wrapping around to the first;
- partial blocks deduplicated by content over all masks and numbered in the
  order process_mask meets them (distinct masks in order of first head, tiles
  row-major), so mask_next and partial_mask_blocks match it entry for entry.

q_sequence is None: the kernel reads every partial tile from
partial_mask_blocks, which is how Splash runs any mask that is not one of its
own computable ones (where process_mask gives q_sequence and a mask function
instead of partial blocks, block_mask and data_next are the same).
"""

from __future__ import annotations

import numpy as np

from .._tile_tables import FULL, PARTIAL_BASE, TileTable, unpack_rows

SPLASH_PARTIAL, SPLASH_FULL = 1, 2
"""Splash's own block kinds (0 empty): the tile table's codes read at Splash's edge."""


def _splash_kinds(tiles: TileTable) -> np.ndarray:
    """uint8 [tiles]: each tile's Splash block kind."""
    return np.where(tiles.codes == FULL, SPLASH_FULL, SPLASH_PARTIAL).astype(np.uint8)


def _splash_matrix(tiles: TileTable) -> np.ndarray:
    """uint8 [q_blocks, kv_blocks]: Splash's block kinds, 0 where no tile is kept."""
    out = np.zeros((tiles.q_blocks, tiles.kv_blocks), np.uint8)
    out[tiles.rows, tiles.cols] = _splash_kinds(tiles)
    return out


def build_mask_info(heads: list[TileTable], mask_info_type):
    """MaskInfo (the given NamedTuple type) of per-head tile tables; heads that
    are equal (signature()) share one distinct mask, as in process_mask."""
    distinct: dict[tuple, int] = {}
    unique: list[TileTable] = []
    head_to_unique = []
    for tiles in heads:
        key = tiles.signature()
        if key not in distinct:
            distinct[key] = len(unique)
            unique.append(tiles)
        head_to_unique.append(distinct[key])
    first = unique[0]
    q_blocks, kv_blocks = first.q_blocks, first.kv_blocks
    for tiles in unique:
        if (tiles.q_blocks, tiles.kv_blocks, tiles.block_q, tiles.block_kv) != (
                q_blocks, kv_blocks, first.block_q, first.block_kv):
            raise ValueError("masks: every head needs the same lengths and tiles")

    final_ids, blocks = _number_partial_tiles(unique)
    if len(unique) == 1:
        block_mask, data_next, mask_next = _shrunk(first, final_ids[0], bool(len(blocks)))
    else:
        block_mask, data_next, mask_next = _per_head(unique, final_ids,
                                                     np.asarray(head_to_unique), bool(len(blocks)))
    partial = unpack_rows(blocks, first.block_kv) if len(blocks) else None
    info = mask_info_type(
        data_next=_downcast(data_next),
        mask_next=None if mask_next is None else _downcast(mask_next),
        block_mask=_downcast(block_mask),
        partial_mask_blocks=partial,
        q_sequence=None,
    )
    for array in info[:4]:
        if array is not None:
            array.flags.writeable = False  # shared through the caches
    return info


def _number_partial_tiles(unique: list[TileTable]):
    """Per distinct mask, the final partial-block id of each tile (-1 for full
    tiles), and the distinct bit patterns in first-use order."""
    tables = [t.bits for t in unique]
    offsets = np.cumsum([0] + [len(t) for t in tables])
    everything = np.concatenate(tables) if offsets[-1] else np.zeros((0, 1, 1), np.uint64)
    if offsets[-1] == 0:
        return [np.full(len(t.ids), -1, np.int64) for t in unique], everything
    rows = np.ascontiguousarray(everything).reshape(len(everything), -1)
    as_void = rows.view(np.dtype((np.void, rows.shape[1] * rows.itemsize))).reshape(-1)
    _, content, = np.unique(as_void, return_inverse=True)
    content = content.reshape(-1)
    # Content id of each partial tile, in the order process_mask walks them.
    walk = np.concatenate([content[offsets[u] + t.ids[t.ids >= 0]] for u, t in enumerate(unique)])
    used, first_use = np.unique(walk, return_index=True)
    order = used[np.argsort(first_use, kind="stable")]
    rank = np.full(content.max() + 1, -1, np.int64)
    rank[order] = np.arange(len(order))
    representative = np.zeros(content.max() + 1, np.int64)
    representative[content[::-1]] = np.arange(len(content))[::-1]
    final_ids = [np.where(t.ids >= 0, rank[content[offsets[u] + np.maximum(t.ids, 0)]], -1)
                 for u, t in enumerate(unique)]
    return final_ids, everything[representative[order]]


def _next_at_or_after(flat_positions: np.ndarray, size: int) -> np.ndarray:
    """For every position in [0, size): index into flat_positions (sorted) of the
    first entry >= it; len(flat_positions) where none is."""
    return np.searchsorted(flat_positions, np.arange(size, dtype=np.int64), side="left")


def _shrunk(tiles: TileTable, ids: np.ndarray, has_partial: bool):
    """One distinct mask: the non-empty tiles of each row, left-aligned."""
    q_blocks, kv_blocks = tiles.q_blocks, tiles.kv_blocks
    counts = np.bincount(tiles.rows, minlength=q_blocks)
    width = int(counts.max()) if len(tiles.rows) else 0
    if width == 0:
        raise ValueError("masks: the mask keeps no pair (Splash needs at least one kept pair)")
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    slot = np.arange(len(tiles.rows)) - starts[tiles.rows]
    block_mask = np.zeros((1, q_blocks, width), np.int32)
    data_next = np.zeros((1, q_blocks, width), np.int32)
    block_mask[0, tiles.rows, slot] = _splash_kinds(tiles)
    data_next[0, tiles.rows, slot] = tiles.cols
    mask_next = None
    if has_partial:
        # A full tile carries the id of the next partial tile at or after it
        # (row-major), wrapping to the first one; a partial tile its own.
        flat = tiles.rows * kv_blocks + tiles.cols
        partial = tiles.codes >= PARTIAL_BASE
        partial_flat, partial_ids = flat[partial], ids[partial]
        nxt = np.searchsorted(partial_flat, flat, side="left") % len(partial_flat)
        mask_next = np.zeros((1, q_blocks, width), np.int32)
        mask_next[0, tiles.rows, slot] = partial_ids[nxt]
    return block_mask, data_next, mask_next


def _per_head(unique: list[TileTable], final_ids: list[np.ndarray], head_to_unique: np.ndarray,
              has_partial: bool):
    """Several distinct masks: every (head, row, column), empty blocks pointing
    at the next non-empty one in (head, row, column) order."""
    heads = len(head_to_unique)
    q_blocks, kv_blocks = unique[0].q_blocks, unique[0].kv_blocks
    size = q_blocks * kv_blocks
    # Within one head: the next non-empty tile's column and the next partial
    # tile's id, -1 past the head's last one (filled from later heads below).
    local = []
    for tiles, ids in zip(unique, final_ids):
        flat = tiles.rows * kv_blocks + tiles.cols
        nxt = _next_at_or_after(flat, size)
        data = np.where(nxt < len(flat), tiles.cols[np.minimum(nxt, len(flat) - 1)], -1) \
            if len(flat) else np.full(size, -1, np.int64)
        partial = tiles.codes >= PARTIAL_BASE
        pflat, pids = flat[partial], ids[partial]
        if len(pflat):
            pnxt = _next_at_or_after(pflat, size)
            mask = np.where(pnxt < len(pflat), pids[np.minimum(pnxt, len(pflat) - 1)], -1)
        else:
            mask = np.full(size, -1, np.int64)
        first_data = int(tiles.cols[0]) if len(flat) else None
        first_mask = int(pids[0]) if len(pflat) else None
        local.append((data, mask, first_data, first_mask))

    def carried(index):  # per head: the first value of the next head that has one, wrapping
        firsts = [local[head_to_unique[h]][index] for h in range(heads)]
        out, following = [0] * heads, None
        for h in range(2 * heads - 1, -1, -1):
            if h < heads:
                out[h] = following
            if firsts[h % heads] is not None:
                following = firsts[h % heads]
        return [0 if v is None else v for v in out]

    carry_data, carry_mask = carried(2), carried(3)
    block_mask = np.stack([_splash_matrix(unique[u]) for u in head_to_unique]).astype(np.int32)
    data_next = np.empty((heads, q_blocks, kv_blocks), np.int32)
    mask_next = np.empty((heads, q_blocks, kv_blocks), np.int32) if has_partial else None
    for h, u in enumerate(head_to_unique):
        data, mask, _, _ = local[u]
        data_next[h] = np.where(data >= 0, data, carry_data[h]).reshape(q_blocks, kv_blocks)
        if mask_next is not None:
            mask_next[h] = np.where(mask >= 0, mask, carry_mask[h]).reshape(q_blocks, kv_blocks)
    return block_mask, data_next, mask_next


def _downcast(array: np.ndarray) -> np.ndarray:
    """The smallest of int8 / int16 / int32 that holds the values (process_mask's
    downcast_smem_data)."""
    if array.size == 0:
        return array
    top = int(array.max())
    for dtype in (np.int8, np.int16):
        if top <= np.iinfo(dtype).max:
            return array.astype(dtype)
    return array.astype(np.int32)


def build_stacked_info(candidates: list[TileTable]):
    """Shrunk grids of several masks stacked for per-head selection: block_mask,
    data_next, mask_next [masks, q_blocks, width] (width: the widest row of any
    of them; shorter rows repeat their last entry with kind 0, so the kernel
    fetches nothing new for them) and the partial blocks of all of them,
    numbered once. A head running mask c reads entry c; the arrays of a layer
    are the entries of its heads' choices, gathered on the device, so every
    choice pattern runs on the same compiled kernel. (process_mask never
    shrinks several masks; the kernel reads any grid width per head.)"""
    final_ids, blocks = _number_partial_tiles(candidates)
    has_partial = bool(len(blocks))
    parts = [_shrunk(t, ids, has_partial) for t, ids in zip(candidates, final_ids)]
    width = max(p[0].shape[-1] for p in parts)

    def stacked(which):
        out = []
        for part, tiles in zip(parts, candidates):
            array = part[which][0]
            counts = np.bincount(tiles.rows, minlength=tiles.q_blocks)
            last = np.maximum(counts - 1, 0)
            edge = array[np.arange(len(array)), last][:, None] if which else 0
            padded = np.empty((len(array), width), np.int32)
            padded[:, :array.shape[1]] = array
            padded[:, array.shape[1]:] = edge if which else 0
            # Rows shorter than their own mask's width repeat their last entry too.
            short = np.arange(width)[None, :] >= counts[:, None]
            padded = np.where(short, edge if which else 0, padded)
            out.append(padded)
        return _downcast(np.stack(out))

    block_mask, data_next = stacked(0), stacked(1)
    mask_next = stacked(2) if has_partial else None
    partial = unpack_rows(blocks, candidates[0].block_kv) if has_partial else None
    return block_mask, data_next, mask_next, partial
