"""VideoAttention(..., backend="flex") on the CPU against the native backend: the
same per-head choices on the planted workloads, the same outputs and LSEs,
every method (svg2's device clusters included), both strategies; and the
flex backend under tilesplash.distributed and tilesplash.diffusers."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tilesplash  # noqa: E402
import tilesplash.flex  # noqa: E402
from tilesplash import Mask, VideoAttention, VideoGeometry  # noqa: E402

from conftest import mask_matrix  # noqa: E402
from test_video import planted  # noqa: E402

KINDS = ["spatial", "temporal", "temporal", "spatial", "temporal"]


def _pair(geometry, **options):
    return (VideoAttention(geometry, **options),
            VideoAttention(geometry, backend="flex", block_q=64, block_kv=64, **options))


def _same(native, flex, out_tol=2e-6):
    (o1, l1, r1), (o2, l2, r2) = native, flex
    assert [h["choice"] for h in r2["heads"]] == [h["choice"] for h in r1["heads"]]
    np.testing.assert_allclose(o2.float().numpy(), o1.float().numpy(), rtol=0,
                               atol=out_tol * max(1.0, float(o1.float().abs().max())))
    np.testing.assert_allclose(l2.numpy(), l1.numpy(), rtol=2e-6, atol=2e-5)
    for h1, h2 in zip(r1["heads"], r2["heads"]):
        assert set(h1) <= set(h2)
        assert (h2["family"], h2["rung"]) == (h1["family"], h1["rung"])
        assert (h2["batch"], h2["head"], h2["routed"]) == (h1["batch"], h1["head"], h1["routed"])
        assert h2["density"] == pytest.approx(h1["density"])
        for name, value in h1["mse"].items():
            assert h2["mse"][name] == pytest.approx(value, rel=1e-3, abs=1e-9)
    assert set(r1) <= set(r2) and r2["backend"] == "flex"


@pytest.mark.parametrize("strategy", ["permute", "per_head"])
@pytest.mark.parametrize("method", ["svg", "mix", "sta", "radial", "temporal"])
def test_planted_heads_make_the_native_choices(method, strategy):
    g = VideoGeometry(8, 4, 4)
    q, k, v = (torch.from_numpy(x) for x in planted(g, KINDS))
    options = dict(method=method, density=0.3, sink=method in ("svg", "mix", "radial"))
    if method in ("mix", "sta"):
        options["density_budget"] = 0.4
    native, flex = _pair(g, **options)
    with tilesplash.flex.configure(strategy=strategy):  # the flex backend's own setting
        results = [layer(q, k, v, layout="bhnd", return_lse=True, layer=1, step=3)
                   for layer in (native, flex)]
    assert tilesplash.flex.settings()["strategy"] == "permute"  # restored
    if method in ("svg", "mix"):
        assert [h["choice"] for h in results[0][2]["heads"]] == KINDS
    _same(*results)
    assert results[1][2]["strategy"] == strategy


@pytest.mark.parametrize("layout", ["bnhd", "bhnd", "hnd"])
def test_text_geometries_layouts_and_batches(layout):
    for g in (VideoGeometry(4, 3, 5, text=6, text_at="before"),
              VideoGeometry(4, 3, 5, text=7, text_at="after")):
        gen = torch.Generator().manual_seed(g.tokens)
        shape = {"bnhd": (2, g.tokens, 3, 16), "bhnd": (2, 3, g.tokens, 16),
                 "hnd": (3, g.tokens, 16)}[layout]
        q, k, v = (torch.randn(shape, generator=gen) for _ in range(3))
        native, flex = _pair(g, density=0.35, sink=True)
        _same(*[layer(q, k, v, layout=layout, return_lse=True, layer=2, step=5)
                for layer in (native, flex)])


def test_bf16_warmup_and_force():
    g = VideoGeometry(8, 4, 4)
    q, k, v = (torch.from_numpy(x).to(torch.bfloat16) for x in planted(g, KINDS))
    native, flex = _pair(g, density=0.3, sink=True, dense_layers=1, dense_steps=2)
    for layer, step in ((0, 5), (3, 1), (3, 2)):
        results = [a(q, k, v, layout="bhnd", return_lse=True, layer=layer, step=step)
                   for a in (native, flex)]
        _same(*results, out_tol=1.6e-2)
        assert results[1][2]["warmup"] == (step < 2 or layer < 1)
    native, flex = _pair(g, density=0.3, sink=True, force="temporal")
    _same(*[a(q, k, v, layout="bhnd", return_lse=True) for a in (native, flex)], out_tol=1.6e-2)
    assert flex(q, k, v, layout="bhnd")[0].dtype == torch.bfloat16


def test_svg2_clusters_on_the_device_equal_the_native_ones():
    # Unclustered data: k-means has no near-ties, so the device k-means (the same
    # initial points and rounds) finds the native clusters, pairs and masks.
    for g in (VideoGeometry(5, 6, 7, text=5, text_at="before"),):
        gen = torch.Generator().manual_seed(3)
        q, k, v = (torch.randn(1, 2, g.tokens, 32, generator=gen) for _ in range(3))
        native, flex = _pair(g, method="svg2", density=0.25)
        for step in range(2):  # cold, then warm-started from the previous step
            qs = q + 0.05 * step * torch.randn(q.shape, generator=gen)
            results = [a(qs, k, v, layout="bhnd", return_lse=True, step=step)
                       for a in (native, flex)]
            _same(*results)
        clusters = flex._runners["flex"].clusters
        assert len(clusters.warm) == 4  # (layer, q / k, head)
        visited = [h["tiles_visited"] for h in results[1][2]["heads"]]
        assert all(0 < x <= 1 for x in visited)
        flex.reset_clusters()
        assert not clusters.warm


@pytest.mark.parametrize("geometry", [VideoGeometry(4, 8, 16, text=9, text_at="after"),
                                      VideoGeometry(3, 7, 9)], ids=["text_after", "ragged"])
def test_svg2_block_lists_equal_its_mask_mod(geometry):
    # The run-order plan of the device clusters, classified from prefix sums, against
    # mask_mod on every pair (eager FlexAttention alone would not notice a wrong list).
    from tilesplash._torch_video.clusters import DeviceClusters
    from test_flex import check_block_lists

    g = geometry
    gen = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, g.tokens, 16, generator=gen) for _ in range(3))
    flex = VideoAttention(g, method="svg2", density=0.2, backend="flex", block_q=64, block_kv=64)
    captured = {}
    original = DeviceClusters.run

    def spy(self, runner, *args):
        import tilesplash._flex.cluster_masks as module

        real = module.BlockMask.from_kv_blocks

        def record(*a, **kw):
            captured["bm"] = real(*a, **kw)
            return captured["bm"]

        module.BlockMask.from_kv_blocks = record
        try:
            return original(self, runner, *args)
        finally:
            module.BlockMask.from_kv_blocks = real

    DeviceClusters.run = spy
    try:
        _, report = flex(q, k, v, layout="bhnd")
    finally:
        DeviceClusters.run = original
    bm, n = captured["bm"], g.tokens
    b = torch.zeros((), dtype=torch.int64)
    for h in range(2):
        keep = bm.mask_mod(b, torch.tensor(h), torch.arange(n)[:, None],
                           torch.arange(n)[None, :]).numpy()
        assert keep.mean() == pytest.approx(report["heads"][h]["density"])
        check_block_lists(bm, h, keep, 64, 64)
        assert 0 < report["heads"][h]["tiles_visited"] <= 1


def test_flex_video_errors():
    g = VideoGeometry(4, 4, 4)
    layer = VideoAttention(g, backend="flex")
    q = torch.randn(1, g.tokens, 2, 16)
    with pytest.raises(ValueError, match="k: expected a tensor on q's device 'meta'"):
        layer(torch.empty(1, g.tokens, 2, 16, device="meta"), q, q)
    with pytest.raises(ValueError, match="q: expected the geometry's 64 tokens, got 63"):
        layer(q[:, :63], q[:, :63], q[:, :63])
    with pytest.raises(ValueError, match="strategy: expected 'permute' or 'per_head'"):
        tilesplash.flex.configure(strategy="other")
    with pytest.raises(ValueError, match="compile: expected None, True or False"):
        tilesplash.flex.configure(compile="yes")
    with pytest.raises(TypeError, match="flex_strategy"):  # no longer VideoAttention's
        VideoAttention(g, flex_strategy="per_head")
    with pytest.raises(ValueError, match="backend"):
        VideoAttention(g, backend="cuda")
    with pytest.raises(TypeError, match="backend: 'flex' runs torch tensors"):
        layer(q.numpy(), q.numpy(), q.numpy())


def test_mask_of_a_flex_head_is_its_candidate_mask():
    # Every routed head's output is masked attention under layer.mask(choice).
    from conftest import reference_attention

    g = VideoGeometry(6, 4, 4, text=4, text_at="after")
    gen = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(1, 3, g.tokens, 16, generator=gen) for _ in range(3))
    layer = VideoAttention(g, method="mix", density=0.3, sink=True, backend="flex")
    out, report = layer(q, k, v, layout="bhnd", layer=4, step=9)
    for h, head in enumerate(report["heads"]):
        keep = mask_matrix(layer.mask(head["choice"]), g.tokens, g.tokens)
        expected, _ = reference_attention(q[0, h:h + 1].numpy(), k[0, h:h + 1].numpy(),
                                          v[0, h:h + 1].numpy(), keep)
        np.testing.assert_allclose(out[0, h:h + 1].numpy(), expected, atol=2e-6)
