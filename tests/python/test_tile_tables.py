"""One tile table for the torch and JAX paths (issue 34): _tile_tables.TileTable.

The torch runner's FlexAttention tables (_flex/tables.py) and the JAX bridge's
Splash tiles (jax/_plans.py) are views of the same TileTable, one code per tile
(FULL, or PARTIAL_BASE + the row of its bits). These tests build both from the
same plans and compare the tables, the sink's joined plan included, and check
that the module imports neither torch nor jax.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from tilesplash import Mask, VideoGeometry
from tilesplash._tile_tables import FULL, PARTIAL_BASE, TileTable, unpack_rows

G = VideoGeometry(3, 5, 7, text=11, text_at="after")
MASKS = [("causal", Mask.causal(), 100, 100), ("local", Mask.local(9, 3), 96, 96),
         ("spatial_sink", Mask.spatial(G, 8, sink=True), G.tokens, G.tokens),
         ("temporal", Mask.temporal(G, 8), G.tokens, G.tokens),
         ("random", Mask.random(0.2, seed=3), 77, 130)]
BLOCKS = [(16, 16), (32, 64), (64, 64)]


def _pairs(table: TileTable) -> np.ndarray:
    """bool [q_blocks * block_q, kv_blocks * block_kv]: the pairs the table keeps."""
    out = np.zeros((table.q_blocks * table.block_q, table.kv_blocks * table.block_kv), bool)
    bits = unpack_rows(table.bits, table.block_kv)
    for r, c, code in zip(table.rows, table.cols, table.codes):
        rows = slice(r * table.block_q, (r + 1) * table.block_q)
        cols = slice(c * table.block_kv, (c + 1) * table.block_kv)
        out[rows, cols] = True if code == FULL else bits[code - PARTIAL_BASE]
    return out


@pytest.mark.parametrize("blocks", BLOCKS, ids=lambda b: f"{b[0]}x{b[1]}")
@pytest.mark.parametrize("name,mask,q_len,kv_len", MASKS, ids=[m[0] for m in MASKS])
def test_torch_and_jax_read_the_same_table(name, mask, q_len, kv_len, blocks):
    pytest.importorskip("jax")
    from tilesplash._flex.tables import plan_tables
    from tilesplash.jax._plans import mask_tiles

    torch_side = plan_tables(mask, q_len, kv_len, *blocks).table
    jax_side = mask_tiles(mask, q_len, kv_len, *blocks)
    # Splash reads the plan zero-padded to whole blocks; the torch runner keeps the
    # ragged edges (FlexAttention knows the lengths). The same table either way.
    assert torch_side.padded().signature() == jax_side.signature()
    keep = np.zeros_like(_pairs(jax_side))
    keep[:q_len, :kv_len] = mask.rows(np.arange(q_len), kv_len, q_len)
    assert np.array_equal(_pairs(jax_side), keep)


def test_the_flex_view_reads_the_table():
    """FlexAttention's tile matrix and lists are the table's codes, its int32 words the
    table's bits."""
    from tilesplash._flex.tables import plan_tables

    tables = plan_tables(Mask.local(9, 3), 100, 100, 32, 32)
    table = tables.table
    assert np.array_equal(tables.tiles, table.matrix())
    for row in range(table.q_blocks):
        full = sorted(table.cols[(table.rows == row) & (table.codes == FULL)])
        partial = sorted(table.cols[(table.rows == row) & (table.codes >= PARTIAL_BASE)])
        assert list(tables.full_idx[row, :tables.full_num[row]]) == full
        assert list(tables.partial_idx[row, :tables.partial_num[row]]) == partial
    assert np.array_equal(tables.words.view(np.uint64).reshape(table.bits.shape), table.bits)


def test_the_sink_joined_plan_is_the_jax_concatenation():
    """The torch runner's joined band + sink plan (one call) is the table the JAX bridge
    concatenates for the same lane."""
    from tilesplash import VideoAttention
    from tilesplash._flex.tables import joined_tables, plan_tables

    layer = VideoAttention(G, method="svg", density=0.3, sink=True)
    run = layer.candidate_run("temporal")
    n, count = G.tokens, run["extra"]["count"]
    joined = joined_tables(plan_tables(run["run_mask"], n, n, 32, 32),
                           plan_tables(run["extra"]["mask"], n, count, 32, 32))
    expected = TileTable.concat([TileTable.from_block_sparse(_export(run["run_mask"], n, n))
                                 .padded(q=False),
                                 TileTable.from_block_sparse(_export(run["extra"]["mask"], n,
                                                                     count))])
    assert joined.table.signature() == expected.signature()
    assert joined.kv_len == -(-n // 32) * 32 + count
    pairs = _pairs(joined.table.padded())
    offset = -(-n // 32) * 32
    assert not pairs[:, n:offset].any()  # the padding keys are kept by no tile
    assert np.array_equal(pairs[:n, :n], run["run_mask"].rows(np.arange(n), n, n))
    assert np.array_equal(pairs[:n, offset:offset + count],
                          run["extra"]["mask"].rows(np.arange(n), count, n))


def _export(mask, q_len, kv_len):
    from tilesplash import _core
    from tilesplash._mask import core_mask

    return _core.plan(core_mask(mask), q_len, kv_len, 32, 32, True).block_sparse()


def test_the_tile_table_module_imports_neither_torch_nor_jax():
    code = ("import sys, tilesplash._tile_tables\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('torch', 'jax', 'jaxlib')]\n"
            "assert not bad, bad\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr
