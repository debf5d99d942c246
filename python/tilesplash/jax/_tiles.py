"""One mask's tiles on Splash's block grid, from a tilesplash plan (NumPy only).

A tilesplash plan lists, per q-block, its full and partial tiles (CSR) and a
table of deduplicated, bit-packed partial tiles (TilePlan.block_sparse()).
Splash needs lengths that are multiples of its blocks, so a ragged plan is
read as the mask zero-padded to whole blocks: its full edge tiles (every
in-range pair kept) become partial tiles whose bits are the in-range
rectangle. TileSet holds the result as flat arrays in row-major tile order,
the order Splash's process_mask walks, and TileSet.concat puts key segments
side by side (a sink's keys appended after the sequence's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FULL, PARTIAL = 2, 1


@dataclass(frozen=True)
class TileSet:
    """The non-empty tiles of one mask, row-major.

    rows, cols: int64 [tiles] block coordinates; kinds: uint8 [tiles], 1
    partial / 2 full; ids: int64 [tiles], a partial tile's row of `table`
    (-1 for full tiles); table: uint64 [patterns, block_q, words] bit-packed
    partial tiles (bit j of word w of row r: key w * 64 + j kept).
    """

    q_blocks: int
    kv_blocks: int
    block_q: int
    block_kv: int
    rows: np.ndarray
    cols: np.ndarray
    kinds: np.ndarray
    ids: np.ndarray
    table: np.ndarray

    @property
    def words(self) -> int:
        return -(-self.block_kv // 64)

    def kinds_matrix(self) -> np.ndarray:
        """uint8 [q_blocks, kv_blocks]: 0 empty, 1 partial, 2 full."""
        out = np.zeros((self.q_blocks, self.kv_blocks), np.uint8)
        out[self.rows, self.cols] = self.kinds
        return out

    def signature(self) -> tuple:
        """Equal for equal tile contents (tilesplash numbers partial tiles in
        first-use order, so equal masks give equal arrays)."""
        return (self.q_blocks, self.kv_blocks, self.block_q, self.block_kv, self.rows.tobytes(),
                self.cols.tobytes(), self.kinds.tobytes(), self.ids.tobytes(), self.table.tobytes())

    @staticmethod
    def from_block_sparse(export: dict) -> "TileSet":
        """From TilePlan.block_sparse(): ragged edges read as zero padding."""
        q_len, kv_len = int(export["q_len"]), int(export["kv_len"])
        bq, bkv = int(export["block_q"]), int(export["block_kv"])
        q_blocks, kv_blocks = int(export["q_blocks"]), int(export["kv_blocks"])
        full_rows = _csr_rows(export["full_offsets"], q_blocks)
        full_cols = np.asarray(export["full_indices"], np.int64)
        part_rows = _csr_rows(export["partial_offsets"], q_blocks)
        part_cols = np.asarray(export["partial_indices"], np.int64)
        part_ids = np.asarray(export["partial_ids"], np.int64)
        table = np.asarray(export["bits"], np.uint64)
        words = -(-bkv // 64)
        if table.size == 0:
            table = np.zeros((0, bq, words), np.uint64)

        # Full tiles on a ragged edge keep only their in-range rectangle: in the
        # zero-padded mask Splash sees they are partial.
        rq = q_len - (q_blocks - 1) * bq
        rk = kv_len - (kv_blocks - 1) * bkv
        on_edge = ((full_rows == q_blocks - 1) & (rq < bq)) | (
            (full_cols == kv_blocks - 1) & (rk < bkv))
        if on_edge.any():
            er, ec = full_rows[on_edge], full_cols[on_edge]
            shapes = np.stack([np.where(er == q_blocks - 1, rq, bq),
                               np.where(ec == kv_blocks - 1, rk, bkv)], axis=1)
            distinct, which = np.unique(shapes, axis=0, return_inverse=True)
            patterns = np.stack([rectangle_bits(int(r), int(c), bq, bkv) for r, c in distinct])
            part_rows = np.concatenate([part_rows, er])
            part_cols = np.concatenate([part_cols, ec])
            part_ids = np.concatenate([part_ids, len(table) + which.reshape(-1)])
            table = np.concatenate([table, patterns])
            full_rows, full_cols = full_rows[~on_edge], full_cols[~on_edge]

        rows = np.concatenate([full_rows, part_rows])
        cols = np.concatenate([full_cols, part_cols])
        kinds = np.concatenate([np.full(len(full_rows), FULL, np.uint8),
                                np.full(len(part_rows), PARTIAL, np.uint8)])
        ids = np.concatenate([np.full(len(full_rows), -1, np.int64), part_ids])
        order = np.argsort(rows * kv_blocks + cols, kind="stable")
        return TileSet(q_blocks, kv_blocks, bq, bkv, rows[order], cols[order], kinds[order],
                       ids[order], np.ascontiguousarray(table))

    @staticmethod
    def concat(segments: list["TileSet"]) -> "TileSet":
        """Key segments side by side: the second's kv blocks follow the first's."""
        first = segments[0]
        rows, cols, kinds, ids, tables = [], [], [], [], []
        kv_offset = id_offset = 0
        for s in segments:
            if (s.q_blocks, s.block_q, s.block_kv) != (first.q_blocks, first.block_q,
                                                       first.block_kv):
                raise ValueError("key segments: every segment needs the same q blocks and tiles")
            rows.append(s.rows)
            cols.append(s.cols + kv_offset)
            kinds.append(s.kinds)
            ids.append(np.where(s.ids >= 0, s.ids + id_offset, -1))
            tables.append(s.table)
            kv_offset += s.kv_blocks
            id_offset += len(s.table)
        rows, cols = np.concatenate(rows), np.concatenate(cols)
        order = np.argsort(rows * kv_offset + cols, kind="stable")
        return TileSet(first.q_blocks, kv_offset, first.block_q, first.block_kv, rows[order],
                       cols[order], np.concatenate(kinds)[order], np.concatenate(ids)[order],
                       np.concatenate(tables))


def rectangle_bits(rows: int, cols: int, block_q: int, block_kv: int) -> np.ndarray:
    """uint64 [block_q, words]: keys [0, cols) kept on rows [0, rows)."""
    keep = np.zeros((block_q, -(-block_kv // 64) * 64), bool)
    keep[:rows, :cols] = True
    return pack_rows(keep)


def pack_rows(keep: np.ndarray) -> np.ndarray:
    """bool [..., words * 64] -> uint64 [..., words], key w * 64 + j in bit j of word w."""
    packed = np.packbits(keep, axis=-1, bitorder="little")
    return np.ascontiguousarray(packed).view("<u8").astype(np.uint64)


def unpack_rows(bits: np.ndarray, block_kv: int) -> np.ndarray:
    """uint64 [..., words] -> bool [..., block_kv]."""
    as_bytes = np.ascontiguousarray(bits, dtype="<u8").view(np.uint8)
    return np.unpackbits(as_bytes, axis=-1, bitorder="little")[..., :block_kv].astype(bool)


def _csr_rows(offsets, q_blocks: int) -> np.ndarray:
    """The row of every entry of a CSR index list."""
    offsets = np.asarray(offsets, np.int64)
    if offsets.shape != (q_blocks + 1,):
        raise ValueError(f"block_sparse: offsets need q_blocks + 1 = {q_blocks + 1} entries, "
                         f"got shape {offsets.shape}")
    return np.repeat(np.arange(q_blocks, dtype=np.int64), np.diff(offsets))
