"""The first-frame sink as its own key segment: its tiles, without a per-block loop.

Wan's Sparse VideoGen masks keep every key of frame 0 for every video query.
In token-major order (temporal heads) those keys are every F-th key, which
would make every tile of the band partial. tilesplash therefore runs the sink
as a second key segment: the P keys of frame 0 appended after the sequence,
keeping exactly the sink pairs the band does not already keep (so no pair is
counted twice). Splash runs both segments in one call over the concatenated
keys; this module gives the segment's tiles.

In run order (frame-major or token-major) frame 0's patch j sits at position
begin + j * stride (stride 1 or F), so a video query at position begin + x
has the band's keys j in [ceil((x - W) / stride), floor((x + W) / stride)],
an interval whose ends never decrease with x. A tile of the segment is empty
when every row's interval covers the tile's keys, full when no row's interval
meets them; both counts come from binary searches over the monotone ends.
Only the remaining tiles get their bits computed, and those bits decide.
"""

from __future__ import annotations

import numpy as np

from ._tiles import FULL, PARTIAL, TileSet, pack_rows

_BATCH = 64  # partial tiles evaluated at a time (bounds the boolean temporaries)


def sink_tiles(video_begin: int, frames: int, per_frame: int, band: int, stride: int,
               q_len: int, block_q: int, block_kv: int) -> TileSet:
    """Tiles of the sink segment: q_len query rows in run order (video rows
    [video_begin, video_begin + frames * per_frame)) against the per_frame keys
    of frame 0; stride is 1 (frame-major) or frames (token-major)."""
    video_end = video_begin + frames * per_frame
    q_blocks = -(-q_len // block_q)
    kv_blocks = -(-per_frame // block_kv)
    x = np.arange(frames * per_frame, dtype=np.int64)
    lo = -((band - x) // stride)   # ceil((x - band) / stride)
    hi = (x + band) // stride

    # Per tile: query rows [r0, r1) of the block that are video, keys [c0, c1).
    block = np.arange(q_blocks, dtype=np.int64)
    r0, r1 = block * block_q, np.minimum((block + 1) * block_q, q_len)
    v0 = np.clip(r0, video_begin, video_end) - video_begin
    v1 = np.clip(r1, video_begin, video_end) - video_begin
    col = np.arange(kv_blocks, dtype=np.int64)
    c0, c1 = col * block_kv, np.minimum((col + 1) * block_kv, per_frame)
    V0, V1 = v0[:, None], v1[:, None]
    # Rows whose interval covers [c0, c1): lo <= c0 (a prefix) and hi >= c1 - 1 (a suffix).
    covered = np.maximum(0, np.minimum(np.searchsorted(lo, c0, "right"), V1)
                         - np.maximum(np.searchsorted(hi, c1 - 1, "left"), V0))
    # Rows whose interval may meet [c0, c1): hi >= c0 and lo <= c1 - 1.
    meeting = np.maximum(0, np.minimum(np.searchsorted(lo, c1 - 1, "right"), V1)
                         - np.maximum(np.searchsorted(hi, c0, "left"), V0))
    video_rows = V1 - V0
    whole = ((r1 - r0) == block_q)[:, None] & ((c1 - c0) == block_kv)[None, :]
    empty = covered >= video_rows  # text rows keep nothing here
    full = ~empty & whole & (video_rows == block_q) & (meeting == 0)
    candidates = ~empty & ~full

    rows_f, cols_f = np.nonzero(full)
    rows_p, cols_p = np.nonzero(candidates)
    bits, kinds = _evaluate(rows_p, cols_p, lo, hi, video_begin, video_end, q_len, per_frame,
                            block_q, block_kv)
    keep = kinds != 0
    rows_p, cols_p, bits, kinds = rows_p[keep], cols_p[keep], bits[keep], kinds[keep]
    ids = np.full(len(rows_p), -1, np.int64)
    partial = kinds == PARTIAL
    words = -(-block_kv // 64)
    table = np.zeros((0, block_q, words), np.uint64)
    if partial.any():
        flat = np.ascontiguousarray(bits[partial]).reshape(int(partial.sum()), -1)
        as_void = flat.view(np.dtype((np.void, flat.shape[1] * 8))).reshape(-1)
        _, first, inverse = np.unique(as_void, return_index=True, return_inverse=True)
        table = bits[partial][first]
        ids[partial] = inverse.reshape(-1)

    rows = np.concatenate([rows_f, rows_p])
    cols = np.concatenate([cols_f, cols_p])
    all_kinds = np.concatenate([np.full(len(rows_f), FULL, np.uint8), kinds.astype(np.uint8)])
    all_ids = np.concatenate([np.full(len(rows_f), -1, np.int64), ids])
    order = np.argsort(rows * kv_blocks + cols, kind="stable")
    return TileSet(q_blocks, kv_blocks, block_q, block_kv, rows[order].astype(np.int64),
                   cols[order].astype(np.int64), all_kinds[order], all_ids[order],
                   np.ascontiguousarray(table))


def _evaluate(rows, cols, lo, hi, video_begin, video_end, q_len, per_frame, block_q, block_kv):
    """Bits (uint64 [tiles, block_q, words]) and exact kinds (0 / 1 / 2) of the
    given tiles of the zero-padded segment."""
    words = -(-block_kv // 64)
    bits = np.zeros((len(rows), block_q, words), np.uint64)
    kinds = np.zeros(len(rows), np.uint8)
    r = np.arange(block_q, dtype=np.int64)
    c = np.arange(words * 64, dtype=np.int64)
    for start in range(0, len(rows), _BATCH):
        q = rows[start:start + _BATCH, None] * block_q + r            # [t, block_q]
        j = cols[start:start + _BATCH, None] * block_kv + c           # [t, words * 64]
        video = (q >= video_begin) & (q < video_end) & (q < q_len)
        x = np.clip(q - video_begin, 0, len(lo) - 1)
        inside = (lo[x][:, :, None] <= j[:, None, :]) & (j[:, None, :] <= hi[x][:, :, None])
        keep = video[:, :, None] & ~inside & (j < per_frame)[:, None, :] \
            & (c < block_kv)[None, None, :]
        bits[start:start + _BATCH] = pack_rows(keep)
        count = keep.sum(axis=(1, 2))
        kinds[start:start + _BATCH] = np.where(count == 0, 0,
                                               np.where(count == block_q * block_kv, FULL,
                                                        PARTIAL))
    return bits, kinds
