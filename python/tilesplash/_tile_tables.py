"""One mask's tiles from a tilesplash plan, in the one encoding every tiled path reads
(the torch runner's FlexAttention tables and the JAX bridge's Splash MaskInfo).

A tilesplash plan lists, per q-block, its full and partial tiles (CSR) and a
table of deduplicated, bit-packed partial tiles (TilePlan.block_sparse()).
TileTable holds them as flat arrays in row-major tile order with one code per
tile: FULL, or PARTIAL_BASE + id for a partial tile whose bits are bits[id]
(empty tiles are absent; code EMPTY where a matrix needs one). Each kernel's
own layout is a view at its edge: the FlexAttention block lists and int32 words
(_flex/tables.py), Splash's block kinds (jax/_mask_info.py).

padded() reads a ragged plan as the mask zero-padded to whole blocks (full
edge tiles become partial tiles of their in-range rectangle): what Splash needs
on every edge, and what a key segment appended after the keys needs on the
kv edge (concat: a sink's keys after the sequence's). NumPy only: importing
this module imports neither torch nor jax.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EMPTY, FULL, PARTIAL_BASE = 0, 1, 2


@dataclass(frozen=True)
class TileTable:
    """The non-empty tiles of one mask, row-major.

    rows, cols: int64 [tiles] block coordinates; codes: int64 [tiles], FULL or
    PARTIAL_BASE + id; bits: uint64 [distinct, block_q, words] bit-packed partial
    tiles (bit j of word w of row r: key w * 64 + j kept). q_len, kv_len: the
    lengths planned (the last blocks may be ragged)."""

    q_len: int
    kv_len: int
    block_q: int
    block_kv: int
    rows: np.ndarray
    cols: np.ndarray
    codes: np.ndarray
    bits: np.ndarray

    @property
    def q_blocks(self) -> int:
        return -(-self.q_len // self.block_q)

    @property
    def kv_blocks(self) -> int:
        return -(-self.kv_len // self.block_kv)

    @property
    def words(self) -> int:
        return -(-self.block_kv // 64)

    @property
    def ids(self) -> np.ndarray:
        """int64 [tiles]: a partial tile's row of `bits`, -1 for a full tile."""
        return np.where(self.codes >= PARTIAL_BASE, self.codes - PARTIAL_BASE, -1)

    def matrix(self) -> np.ndarray:
        """int32 [q_blocks, kv_blocks]: every tile's code (EMPTY where absent)."""
        out = np.zeros((self.q_blocks, self.kv_blocks), np.int32)
        out[self.rows, self.cols] = self.codes
        return out

    def signature(self) -> tuple:
        """Equal for equal tile contents (tilesplash numbers partial tiles in
        first-use order, so equal masks give equal arrays)."""
        return (self.q_len, self.kv_len, self.block_q, self.block_kv, self.rows.tobytes(),
                self.cols.tobytes(), self.codes.tobytes(), self.bits.tobytes())

    @staticmethod
    def empty(q_len: int, kv_len: int, block_q: int, block_kv: int) -> "TileTable":
        none = np.zeros(0, np.int64)
        return TileTable(q_len, kv_len, block_q, block_kv, none, none, none,
                         np.zeros((0, block_q, -(-block_kv // 64)), np.uint64))

    @staticmethod
    def from_block_sparse(export: dict) -> "TileTable":
        """From TilePlan.block_sparse(), exactly as planned (ragged edges kept)."""
        q_blocks, kv_blocks = int(export["q_blocks"]), int(export["kv_blocks"])
        bq, bkv = int(export["block_q"]), int(export["block_kv"])
        full_rows = _csr_rows(export["full_offsets"], q_blocks)
        part_rows = _csr_rows(export["partial_offsets"], q_blocks)
        bits = np.asarray(export["bits"], np.uint64)
        if bits.size == 0:
            bits = np.zeros((0, bq, -(-bkv // 64)), np.uint64)
        rows = np.concatenate([full_rows, part_rows])
        cols = np.concatenate([np.asarray(export["full_indices"], np.int64),
                               np.asarray(export["partial_indices"], np.int64)])
        codes = np.concatenate([np.full(len(full_rows), FULL, np.int64),
                                PARTIAL_BASE + np.asarray(export["partial_ids"], np.int64)])
        order = np.argsort(rows * kv_blocks + cols, kind="stable")
        table = TileTable(int(export["q_len"]), int(export["kv_len"]), bq, bkv, rows[order],
                          cols[order], codes[order], np.ascontiguousarray(bits))
        if (table.q_blocks, table.kv_blocks) != (q_blocks, kv_blocks):
            raise ValueError(f"block_sparse: {q_blocks} x {kv_blocks} blocks do not tile "
                             f"{table.q_len} x {table.kv_len} by {bq} x {bkv}")
        return table

    def padded(self, q: bool = True, kv: bool = True) -> "TileTable":
        """The mask zero-padded to whole blocks on the q edge, the kv edge or both: a full
        tile on a ragged padded edge becomes partial, its bits the in-range rectangle."""
        rq = self.q_len - (self.q_blocks - 1) * self.block_q
        rk = self.kv_len - (self.kv_blocks - 1) * self.block_kv
        q_edge = (self.rows == self.q_blocks - 1) & (q and rq < self.block_q)
        kv_edge = (self.cols == self.kv_blocks - 1) & (kv and rk < self.block_kv)
        on_edge = (self.codes == FULL) & (q_edge | kv_edge)
        if not on_edge.any():
            return self
        shapes = np.stack([np.where(q_edge[on_edge], rq, self.block_q),
                           np.where(kv_edge[on_edge], rk, self.block_kv)], axis=1)
        distinct, which = np.unique(shapes, axis=0, return_inverse=True)
        patterns = np.stack([rectangle_bits(int(r), int(c), self.block_q, self.block_kv)
                             for r, c in distinct])
        codes = self.codes.copy()
        codes[on_edge] = PARTIAL_BASE + len(self.bits) + which.reshape(-1)
        return TileTable(self.q_len, self.kv_len, self.block_q, self.block_kv, self.rows,
                         self.cols, codes, np.concatenate([self.bits, patterns]))

    @staticmethod
    def concat(segments: list["TileTable"]) -> "TileTable":
        """Key segments side by side: each segment's keys start at a whole kv block after
        the previous one's (the padding between them kept by no tile; pass segments
        padded(q=False) where a ragged full edge tile must not reach into it)."""
        first = segments[0]
        rows, cols, codes, bits = [], [], [], []
        kv_offset = id_offset = 0
        for s in segments:
            if (s.q_len, s.block_q, s.block_kv) != (first.q_len, first.block_q, first.block_kv):
                raise ValueError("segments: every key segment needs the same query length "
                                 "and tiles")
            rows.append(s.rows)
            cols.append(s.cols + kv_offset)
            codes.append(np.where(s.codes >= PARTIAL_BASE, s.codes + id_offset, s.codes))
            bits.append(s.bits)
            kv_offset += s.kv_blocks
            id_offset += len(s.bits)
        kv_len = (kv_offset - segments[-1].kv_blocks) * first.block_kv + segments[-1].kv_len
        rows, cols = np.concatenate(rows), np.concatenate(cols)
        order = np.argsort(rows * kv_offset + cols, kind="stable")
        return TileTable(first.q_len, kv_len, first.block_q, first.block_kv, rows[order],
                         cols[order], np.concatenate(codes)[order], np.concatenate(bits))


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
