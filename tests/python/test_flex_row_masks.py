"""Plans as per-row key intervals (TilePlan.row_intervals, include/tilesplash/row_intervals.h)
and the per-row FlexAttention mask_mod built from them (python/tilesplash/_flex/masks.py):
the intervals reproduce the mask on every pair, the per-row BlockMask gives the table
BlockMask's output bit for bit, and masks whose rows break into more pieces keep the
table."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tilesplash  # noqa: E402
import tilesplash.flex  # noqa: E402
from tilesplash import Mask, VideoGeometry  # noqa: E402
from tilesplash._flex import options  # noqa: E402

G = VideoGeometry(5, 6, 7, text=11, text_at="after")
G_BEFORE = VideoGeometry(4, 5, 6, text=9, text_at="before")

INTERVAL_MASKS = [
    ("dense", Mask.dense(), 77, 77),
    ("causal", Mask.causal(), 100, 100),
    ("causal-offset", Mask.causal(-7), 90, 130),
    ("local", Mask.local(13, 5), 150, 150),
    ("local-one-sided", Mask.local(None, 9, 4), 97, 120),
    ("chunked", Mask.chunked(16), 100, 100),
    ("spatial-sink-text", Mask.spatial(G, density=0.3, sink=True, text_full=True), G.tokens,
     G.tokens),
    ("spatial-text-before", Mask.spatial(G_BEFORE, density=0.25, text_full=True), G_BEFORE.tokens,
     G_BEFORE.tokens),
    ("keys", Mask.local(20, 20) & Mask.key_range(0, 60), 80, 80),
]


def _expand(starts, ends, kv_len):
    k = np.arange(kv_len)[None, None, :]
    return ((k >= starts[:, :, None]) & (k < ends[:, :, None])).any(axis=0)


@pytest.mark.parametrize("name, mask, q_len, kv_len", INTERVAL_MASKS, ids=[m[0] for m in
                                                                           INTERVAL_MASKS])
@pytest.mark.parametrize("blocks", [(16, 16), (32, 64), (128, 128), (7, 9)])
def test_row_intervals_reproduce_every_pair(name, mask, q_len, kv_len, blocks):
    plan = tilesplash.plan(mask, q_len, kv_len, block_q=blocks[0], block_kv=blocks[1],
                           original_order=True)
    found = plan.row_intervals(4)
    assert found is not None, name
    starts, ends = found
    assert starts.shape == ends.shape == (4, q_len) and starts.dtype == np.int32
    assert np.all(starts <= ends)
    expected = mask.rows(np.arange(q_len), kv_len, q_len)
    np.testing.assert_array_equal(_expand(starts, ends, kv_len), expected)


def test_rows_with_more_pieces_than_allowed_give_none():
    random = Mask.random(0.3, seed=1)
    assert tilesplash.plan(random, 64, block_q=16, block_kv=16).row_intervals(4) is None
    stripes = Mask.any_of([Mask.local(0, 0, offset) for offset in (-40, -20, 0, 20, 40)])
    plan = tilesplash.plan(stripes, 100, block_q=32, block_kv=32)
    assert plan.row_intervals(4) is None and plan.row_intervals(5) is not None
    with pytest.raises(ValueError, match="max_intervals"):
        plan.row_intervals(0)


def _qkv(n, heads=3, d=32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(1, heads, n, d, generator=gen) for _ in range(3)]


@pytest.mark.parametrize("name, mask, q_len, kv_len", INTERVAL_MASKS[1:7],
                         ids=[m[0] for m in INTERVAL_MASKS[1:7]])
def test_the_row_mask_mod_equals_the_table_and_the_native_kernel(name, mask, q_len, kv_len):
    q = _qkv(q_len)[0]
    _, k, v = _qkv(kv_len, seed=1)
    rows = tilesplash.flex.block_mask(mask, q_len, kv_len, device="cpu")
    table = tilesplash.flex.block_mask(mask, q_len, kv_len, device="cpu", mask_mod="table")
    assert options.mask_mod_kind(rows) == options.INDEX
    assert options.mask_mod_kind(table) == options.TABLE
    from torch.nn.attention.flex_attention import flex_attention

    out_rows = flex_attention(q, k, v, block_mask=rows)
    out_table = flex_attention(q, k, v, block_mask=table)
    assert torch.equal(out_rows, out_table)
    native = tilesplash.attention(q, k, v, mask=mask, layout="bhnd", backend="cpu")
    np.testing.assert_allclose(out_rows.numpy(), native.numpy(), atol=2e-5)


def test_per_head_lists_mix_and_fall_back():
    n = G.tokens
    spatial = Mask.spatial(G, density=0.3, sink=True, text_full=True)
    local = Mask.local(30, 30)
    random = Mask.random(0.3, seed=2)
    q, k, v = _qkv(n)
    from torch.nn.attention.flex_attention import flex_attention

    mixed = tilesplash.flex.block_mask([spatial, local, Mask.causal()], n, device="cpu")
    assert options.mask_mod_kind(mixed) == options.INDEX
    expected = tilesplash.flex.block_mask([spatial, local, Mask.causal()], n, device="cpu",
                                          mask_mod="table")
    assert torch.equal(flex_attention(q, k, v, block_mask=mixed),
                       flex_attention(q, k, v, block_mask=expected))
    with_random = tilesplash.flex.block_mask([spatial, random, local], n, device="cpu")
    assert options.mask_mod_kind(with_random) == options.TABLE  # one head without intervals
    with pytest.raises(ValueError, match="mask_mod: 'rows' needs every row"):
        tilesplash.flex.block_mask([spatial, random, local], n, device="cpu", mask_mod="rows")
    with pytest.raises(ValueError, match="mask_mod: expected one of"):
        tilesplash.flex.block_mask(spatial, n, device="cpu", mask_mod="formula")


def test_kernel_options_follow_the_block_masks_kind():
    n = 256
    rows = tilesplash.flex.block_mask(Mask.local(16, 16), n, device="cpu")
    q = torch.zeros(1, 1, n, 128, dtype=torch.bfloat16)
    assert tilesplash.flex.kernel_options(q, rows) is None  # CPU: nothing to choose
    h200 = options.DeviceLimits("H200", (9, 0), 232_448)
    assert options.choices(h200, 128, 2, (128, 128), options.mask_mod_kind(rows))[0] is None


@pytest.mark.parametrize("mask_mod", ["rows", "table"])
def test_a_new_routing_choice_keeps_the_table_shapes(mask_mod):
    """Heads that switch between one, two and three masks from one step to the next give
    mask_mods whose tensors have the same shapes: no recompile of the compiled kernel."""
    n = G.tokens
    spatial = Mask.spatial(G, density=0.3, sink=True, text_full=True)
    local, causal = Mask.local(30, 30), Mask.causal()
    shapes = set()
    for heads in ([spatial] * 4, [spatial, local, spatial, local], [spatial, local, causal, local]):
        bm = tilesplash.flex.block_mask(heads, n, device="cpu", mask_mod=mask_mod)
        closure = dict(zip(bm.mask_mod.__code__.co_freevars,
                           (c.cell_contents for c in bm.mask_mod.__closure__)))
        shapes.add(tuple((name, tuple(t.shape)) for name, t in sorted(closure.items())
                         if isinstance(t, torch.Tensor) and name != "words"))
    assert len(shapes) == 1, shapes
