"""The backend seam from Python: TilePlan.block_sparse() against a brute-force
classification, plan(original_order=True), Mask.rows(), and VideoAttention's
sampled_rows() / candidate_run(), each checked against what the native
router and kernel do with them."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import tilesplash
from tilesplash import Mask

from conftest import mask_matrix, reference_attention


def _families():
    g = tilesplash.VideoGeometry(3, 4, 5, text=7, text_at="after")
    g0 = tilesplash.VideoGeometry(4, 4, 4)
    n = g.tokens
    return [
        ("causal", 90, 70),
        ("local:left=9,right=3,offset=5", 77, 130),
        ("chunked:size=13", 100, 100),
        (Mask.random(0.4, seed=3), 61, 83),
        (Mask.spatial(g, band=9, sink=True, text_full=True), n, n),
        (Mask.temporal(g, band=2, sink=True, text_full=True), n, n),
        (Mask.temporal(g0, band=2), g0.tokens, g0.tokens),
        (Mask.radial(g0, decay=0.3, block=8, sink=True), g0.tokens, g0.tokens),
        (Mask.sta(g0, window=(1, 3, 3), tile=(2, 2, 2)), g0.tokens, g0.tokens),
    ]


@pytest.mark.parametrize("blocks", [(16, 16), (8, 24), (32, 64)])
@pytest.mark.parametrize("case", range(9))
def test_block_sparse_equals_brute_force(case, blocks):
    mask, q_len, kv_len = _families()[case]
    mask = tilesplash.Mask.parse(mask) if isinstance(mask, str) else mask
    bq, bk = blocks
    arrays = tilesplash.plan(mask, q_len, kv_len, bq, bk, original_order=True).block_sparse()
    keep = mask_matrix(mask, q_len, kv_len)
    qb, kb = -(-q_len // bq), -(-kv_len // bk)
    assert (arrays["q_blocks"], arrays["kv_blocks"]) == (qb, kb)
    assert arrays["words_per_row"] == -(-bk // 64)
    bits = arrays["bits"]
    assert bits.dtype == np.uint64 and bits.shape[1:] == (bq, arrays["words_per_row"])
    assert not bits.flags.writeable
    for name in ("full_offsets", "partial_offsets"):
        assert arrays[name].dtype == np.int64 and arrays[name].shape == (qb + 1,)
    for name in ("full_indices", "partial_indices", "partial_ids"):
        assert arrays[name].dtype == np.int32
    for i in range(qb):
        full = arrays["full_indices"][arrays["full_offsets"][i]:arrays["full_offsets"][i + 1]]
        lo, hi = arrays["partial_offsets"][i], arrays["partial_offsets"][i + 1]
        partial = arrays["partial_indices"][lo:hi]
        ids = arrays["partial_ids"][lo:hi]
        assert np.all(np.diff(full) > 0) and np.all(np.diff(partial) > 0)
        for j in range(kb):
            tile = keep[i * bq:(i + 1) * bq, j * bk:(j + 1) * bk]
            if tile.all():
                assert j in full and j not in partial
            elif tile.any():
                assert j in partial and j not in full
                words = bits[ids[list(partial).index(j)]]
                unpacked = np.unpackbits(words.view(np.uint8), axis=-1, bitorder="little")
                unpacked = unpacked.reshape(bq, -1)[:tile.shape[0], :]
                assert np.array_equal(unpacked[:, :tile.shape[1]].astype(bool), tile)
                assert not unpacked[:, tile.shape[1]:].any()
            else:
                assert j not in full and j not in partial


def test_bits_outlive_the_plan_and_the_cache():
    arrays = tilesplash.plan("causal", 64, block_q=16, block_kv=16).block_sparse()
    tilesplash.clear_plan_cache()
    gc.collect()
    expected = (np.uint64(2) << np.arange(16, dtype=np.uint64)) - np.uint64(1)
    assert np.array_equal(arrays["bits"][0, :, 0], expected)


def test_original_order_plans_the_mask_as_given():
    g = tilesplash.VideoGeometry(4, 4, 4)
    mask = Mask.temporal(g, band=3)
    run = tilesplash.plan(mask, g.tokens, block_q=16, block_kv=16)
    given = tilesplash.plan(mask, g.tokens, block_q=16, block_kv=16, original_order=True)
    assert run.stats()["plan_order"] == "token-major"
    assert "plan_order" not in given.stats()
    assert given.stats()["kept_pairs"] == mask_matrix(mask, g.tokens, g.tokens).sum()
    with pytest.raises(TypeError, match="original_order"):
        tilesplash.plan(mask, g.tokens, original_order=1)


def test_mask_rows_equal_keeps_and_check_their_arguments():
    g = tilesplash.VideoGeometry(3, 4, 5, text=6, text_at="before")
    mask = Mask.spatial(g, band=7, sink=True, text_full=True) | Mask.causal(-20)
    rows = [0, 5, 17, g.tokens - 1]
    got = mask.rows(rows, g.tokens)
    assert got.dtype == bool and got.shape == (4, g.tokens)
    assert np.array_equal(got, mask_matrix(mask, g.tokens, g.tokens)[rows])
    assert Mask.causal().rows([3], 10, q_len=5).tolist() == [[True] * 4 + [False] * 6]
    with pytest.raises(ValueError, match="rows"):
        Mask.causal().rows([10], 10)
    with pytest.raises(ValueError, match="kv_len"):
        mask.rows([0], g.tokens + 1)  # a video mask covers exactly its tokens
    with pytest.raises(TypeError, match="rows"):
        Mask.causal().rows([[1, 2]], 10)
    assert Mask.causal().rows([], 10).shape == (0, 10)


def test_sampled_rows_are_the_rows_the_router_scores():
    # The router's sampled-row MSE, recomputed from sampled_rows() and each
    # candidate's mask, equals the MSE the native router reports.
    g = tilesplash.VideoGeometry(4, 4, 6)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, g.tokens, 2, 32)).astype(np.float32) for _ in range(3))
    layer = tilesplash.VideoAttention(g, density=0.3, sink=True, samples=9, seed=4)
    _, report = layer(q, k, v, layer=2, step=5)
    rows = layer.sampled_rows(2, 5)
    assert rows.dtype == np.int64 and len(rows) == 9 and np.all(np.diff(rows) > 0)
    assert not np.array_equal(rows, layer.sampled_rows(2, 6))
    for head in range(2):
        qh, kh, vh = (x[0, :, head, :] for x in (q, k, v))
        dense, _ = reference_attention(qh[None, rows], kh[None], vh[None],
                                       np.ones((len(rows), g.tokens), bool))
        for name, _density in layer.candidates:
            keep = layer.mask(name).rows(rows, g.tokens)
            out, _ = reference_attention(qh[None, rows], kh[None], vh[None], keep)
            mse = float(np.mean((out - dense) ** 2))
            assert report["heads"][head]["mse"][name] == pytest.approx(mse, rel=1e-3, abs=1e-9)


@pytest.mark.parametrize("method", ["svg", "radial", "sta", "mix"])
def test_candidate_run_reproduces_the_candidate_mask(method):
    # Permute by "order", attend under "run_mask", merge the "extra" key segment
    # through the LSEs, permute back: masked attention under "mask".
    g = tilesplash.VideoGeometry(6, 8, 8)
    n = g.tokens
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, n, 32)).astype(np.float32) for _ in range(3))
    layer = tilesplash.VideoAttention(g, method=method, density=0.3,
                                      sink=method in ("svg", "radial"))
    for name, density in layer.candidates:
        run = layer.candidate_run(name)
        assert run["name"] == name and run["density"] == density
        order = np.arange(n) if run["order"] is None else run["order"]
        kv_order = order if run["kv_order"] is None else run["kv_order"]
        assert sorted(order.tolist()) == list(range(n))
        qr, kr, vr = q[:, order], k[:, kv_order], v[:, kv_order]
        out, lse = tilesplash.attention(qr, kr, vr, mask=run["run_mask"], layout="hnd",
                                        return_lse=True)
        extra = run["extra"]
        if extra is not None:
            keys = extra["first"] + extra["stride"] * np.arange(extra["count"])
            out2, lse2 = tilesplash.attention(qr, kr[:, keys], vr[:, keys], mask=extra["mask"],
                                              layout="hnd", return_lse=True)
            out, lse = tilesplash.merge_attention([out, out2], [lse, lse2], layout="hnd")
        result = np.empty_like(out)
        result[:, order] = out
        expected, _ = reference_attention(q, k, v, mask_matrix(run["mask"], n, n))
        np.testing.assert_allclose(result, expected, atol=2e-5)
    with pytest.raises(ValueError, match="no candidate 'nope'"):
        layer.candidate_run("nope")
