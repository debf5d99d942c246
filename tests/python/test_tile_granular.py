"""granularity="tile": masks rounded out to whole kernel tiles (tile_granular.h).

Every reference here rounds in NumPy, from the exact mask's keep matrix: a tile
is kept when the exact mask keeps a pair of it, and then every pair of it is
kept. The native kernel on a rounded mask equals a float64 softmax under that
matrix (many masks, ragged lengths, several tile sizes) and its plan has no
partial tile; VideoAttention(granularity="tile") equals the same reference in
each candidate's run order (the sink segment disjoint from the rounded band);
the flex backend on CPU tensors equals the native one, and its BlockMasks have
no partial block and a no-mask_mod twin for compiled calls; bad values are
refused by name.
"""

from __future__ import annotations

import numpy as np
import pytest

import tilesplash
from tilesplash import Mask, VideoAttention, VideoGeometry
from tilesplash._backends import BACKENDS


def rounded(keep, block_q, block_kv):
    """The keep matrix rounded out to block_q x block_kv tiles."""
    q_len, kv_len = keep.shape
    qt, kt = -(-q_len // block_q), -(-kv_len // block_kv)
    padded = np.zeros((qt * block_q, kt * block_kv), bool)
    padded[:q_len, :kv_len] = keep
    tiles = padded.reshape(qt, block_q, kt, block_kv).any(axis=(1, 3))
    return np.repeat(np.repeat(tiles, block_q, 0), block_kv, 1)[:q_len, :kv_len]


def exact(mask, q_len, kv_len):
    return np.asarray(mask.rows(np.arange(q_len), kv_len, q_len), bool)


def reference(q, k, v, keep, scale=None):
    """float64 softmax attention of [H, N, d] arrays under keep [Nq, Nk]; rows keeping
    nothing give 0."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    s = np.where(keep[None], scale * q @ k.transpose(0, 2, 1), -np.inf)
    m = s.max(-1, keepdims=True)
    p = np.where(keep[None], np.exp(s - np.where(np.isfinite(m), m, 0)), 0.0)
    den = p.sum(-1, keepdims=True)
    return np.where(den > 0, p @ v / np.where(den > 0, den, 1), 0.0)


MASKS = [
    Mask.causal(),
    Mask.local(5, 9),
    Mask.chunked(24),
    Mask.random(0.01, 3),
    Mask.key_range(7, 61),
    Mask.parse("local:left=40,right=0,offset=-30"),
]


@pytest.mark.parametrize("mask", MASKS, ids=str)
@pytest.mark.parametrize("shape", [(97, 131), (128, 128), (200, 77), (33, 260)])
@pytest.mark.parametrize("blocks", [(16, 64), (40, 128), (64, 64)])
def test_native_kernel_equals_the_rounded_reference(mask, shape, blocks):
    q_len, kv_len = shape
    bq, bk = blocks
    rng = np.random.default_rng(q_len * 7 + kv_len)
    q = rng.standard_normal((1, 2, q_len, 32)).astype(np.float32)
    k = rng.standard_normal((1, 2, kv_len, 32)).astype(np.float32)
    v = rng.standard_normal((1, 2, kv_len, 32)).astype(np.float32)
    tile_mask = mask.tile_granular(q_len, kv_len, bq, bk)
    keep = rounded(exact(mask, q_len, kv_len), bq, bk)
    assert np.array_equal(exact(tile_mask, q_len, kv_len), keep)
    stats = tilesplash.plan(tile_mask, q_len, kv_len, bq, bk).stats()
    assert stats["partial"] == 0 and stats["kept_pairs"] == int(keep.sum())
    out = tilesplash.attention(q, k, v, mask=tile_mask, block_q=bq, block_kv=bk)
    np.testing.assert_allclose(out[0], reference(q[0], k[0], v[0], keep), atol=2e-5, rtol=0)


def run_reference(va, name, q, k, v, block):
    """The output of candidate `name` at tile granularity, computed in float64 from
    candidate_run(): the run mask rounded in the run order, the separate key segment
    rounded and stripped of the band's pairs, one softmax over their union."""
    run = va.candidate_run(name)
    n = q.shape[1]
    order = np.arange(n) if run["order"] is None else np.asarray(run["order"])
    kv_order = order if run["kv_order"] is None else np.asarray(run["kv_order"])
    band = rounded(exact(run["run_mask"], n, n), block, block)
    keep = band.copy()
    if run["extra"] is not None:
        e = run["extra"]
        keys = e["first"] + np.arange(e["count"]) * e["stride"]
        segment = rounded(exact(e["mask"], n, e["count"]), block, block) & ~band[:, keys]
        keep[:, keys] |= segment
    out_run = reference(q[:, order], k[:, kv_order], v[:, kv_order], keep)
    out = np.empty_like(out_run)
    out[:, order] = out_run
    return out


CANDIDATES = [("svg", "spatial", True), ("svg", "temporal", True), ("svg", "temporal", False),
              ("radial", "radial", False), ("sta", None, False)]


@pytest.mark.parametrize("geometry", [(6, 8, 8), (5, 8, 7)])
@pytest.mark.parametrize("method,name,sink", CANDIDATES)
def test_video_attention_tile_equals_the_run_order_reference(geometry, method, name, sink):
    g = VideoGeometry(*geometry)
    va = VideoAttention(g, method=method, density=0.25, sink=sink, block_q=64, block_kv=64,
                        granularity="tile", backend="cpu")
    name = name or va.candidates[0][0]
    va = VideoAttention(g, method=method, density=0.25, sink=sink, block_q=64, block_kv=64,
                        granularity="tile", backend="cpu", force=name)
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 2, g.tokens, 32)).astype(np.float32) for _ in range(3))
    out, report = va(q, k, v, layout="bhnd")
    expected = run_reference(va, name, q[0], k[0], v[0], 64)
    np.testing.assert_allclose(out[0], expected, atol=2e-5, rtol=0)
    assert report["granularity"] == "tile"
    token = VideoAttention(g, method=method, density=0.25, sink=sink, block_q=64, block_kv=64,
                           backend="cpu", force=name)
    _, token_report = token(q, k, v, layout="bhnd")
    # Rounding out keeps at least the exact mask.
    for a, b in zip(report["heads"], token_report["heads"]):
        assert a["density"] >= b["density"] - 1e-12


def _torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("method,sink", [("svg", True), ("svg", False), ("radial", False),
                                         ("sta", False)])
def test_flex_on_cpu_equals_native_and_has_no_partial_block(method, sink):
    torch = _torch()
    from tilesplash._flex.options import FULL_ONLY_TAG, NO_MASK, MASK_MOD_TAG

    g = VideoGeometry(6, 8, 8)
    options = dict(method=method, density=0.25, sink=sink, block_q=64, block_kv=64,
                   granularity="tile", density_budget=0.5 if method == "sta" else None)
    native = VideoAttention(g, backend="cpu", **options)
    flex = VideoAttention(g, backend="flex", **options)
    rng = np.random.default_rng(2)
    q, k, v = (torch.from_numpy(rng.standard_normal((1, 3, g.tokens, 32)).astype(np.float32))
               for _ in range(3))
    o1, l1, r1 = native(q, k, v, layout="bhnd", return_lse=True)
    o2, l2, r2 = flex(q, k, v, layout="bhnd", return_lse=True)
    assert [h["choice"] for h in r1["heads"]] == [h["choice"] for h in r2["heads"]]
    np.testing.assert_allclose(o2.numpy(), o1.numpy(), atol=2e-5, rtol=0)
    np.testing.assert_allclose(l2.numpy(), l1.numpy(), atol=2e-5, rtol=2e-6)
    for h1, h2 in zip(r1["heads"], r2["heads"]):
        assert h2["density"] == pytest.approx(h1["density"])
    assert r2["granularity"] == "tile"
    runner = flex._runner(BACKENDS["flex"])
    choices = [h["choice"] for h in r2["heads"]]
    masks = runner.block_masks(choices, "cpu")
    partial = [int(bm.kv_num_blocks.sum()) for bm in masks]
    # Only the first-frame sink segment of token-major heads may keep partial blocks
    # (where the rounded band overlaps it); every other call has full blocks only.
    assert sum(p > 0 for p in partial) <= (1 if sink else 0)
    for bm, p in zip(masks, partial):
        assert hasattr(bm, FULL_ONLY_TAG) == (p == 0)
        if p == 0:
            twin = getattr(bm, FULL_ONLY_TAG)
            assert getattr(twin, MASK_MOD_TAG) == NO_MASK
            assert torch.equal(twin.full_kv_num_blocks, bm.full_kv_num_blocks)
            assert torch.equal(twin.full_kv_indices, bm.full_kv_indices)


def test_token_granularity_block_masks_keep_their_partial_blocks():
    torch = _torch()
    from tilesplash._flex.options import FULL_ONLY_TAG

    g = VideoGeometry(6, 8, 8)
    flex = VideoAttention(g, backend="flex", force="spatial", block_q=64, block_kv=64)
    q = torch.zeros((1, 1, g.tokens, 32))
    flex(q, q, q, layout="bhnd")
    (bm,) = flex._runner(BACKENDS["flex"]).block_masks(["spatial"], "cpu")
    assert int(bm.kv_num_blocks.sum()) > 0 and not hasattr(bm, FULL_ONLY_TAG)


def test_bad_granularity_is_refused_by_name():
    g = VideoGeometry(2, 4, 4)
    with pytest.raises(ValueError, match="granularity: expected 'token' or 'tile', got 'tiles'"):
        VideoAttention(g, granularity="tiles")
    with pytest.raises(TypeError, match="granularity: expected 'token' or 'tile', got int"):
        VideoAttention(g, granularity=1)
    with pytest.raises(ValueError, match="granularity: 'tile' is not available for method 'svg2'"):
        va = VideoAttention(g, method="svg2", granularity="tile", backend="flex")
        _torch()
        va._runner(BACKENDS["flex"])
    with pytest.raises(ValueError, match="q_len: expected an int in \\[1"):
        Mask.causal().tile_granular(0, 4)


def test_diffusers_enable_passes_the_granularity_to_every_layer():
    torch = _torch()
    pytest.importorskip("diffusers")
    from diffusers_tiny import run_wan, tiny_wan, wan_inputs

    import tilesplash.diffusers as tsd

    model = tiny_wan()
    hidden, text = wan_inputs()
    outs = {}
    for granularity in ("token", "tile"):
        handle = tsd.enable(model, granularity=granularity, dense_layers=0, dense_steps=0,
                            backend="cpu")
        try:
            outs[granularity] = run_wan(model, hidden, text)
            layers = list(handle._runtime._layers.values())
            assert layers and all(layer._runner_settings["granularity"] == granularity
                                  for layer in layers)
        finally:
            handle.remove()
    assert not torch.equal(outs["token"], outs["tile"])


def test_diffusers_enable_refuses_a_bad_granularity():
    _torch()
    pytest.importorskip("diffusers")
    from diffusers_tiny import tiny_wan

    from tilesplash.diffusers import enable

    with pytest.raises(ValueError, match="granularity: expected 'token' or 'tile', got 'Tile'"):
        enable(tiny_wan(), granularity="Tile")
