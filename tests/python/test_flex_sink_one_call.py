"""The first-frame sink runs inside the band's kernel call (issue 34, item 5).

A token-major head's sink is a key segment (every F-th key); it used to run as a
second FlexAttention call merged through the LSEs. Now its tiles are joined to the
band's plan, so a layer makes one kernel call per distinct row order its heads
need. The kernel entry is patched to count the calls; test_flex_tile_agreement.py
holds the results equal to the native backend's.
"""

from __future__ import annotations

import numpy as np
import pytest

from tilesplash import VideoAttention, VideoGeometry

torch = pytest.importorskip("torch")

from tilesplash._torch_video import kernels  # noqa: E402


@pytest.fixture
def calls(monkeypatch):
    """The kernel calls made, as (key length) per call."""
    made = []
    triton = next(k for k in kernels.KERNELS if k.name == "triton")
    run = type(triton).run

    def counting(self, q, k, v, block_mask, scale, **options):
        made.append(int(k.shape[2]))
        return run(self, q, k, v, block_mask, scale, **options)

    monkeypatch.setattr(type(triton), "run", counting)
    return made


def _orders(layer, names):
    """The distinct row orders the candidates `names` run in."""
    return {layer.candidate_run(name)["order_name"] for name in names}


def _inputs(g, heads=2):
    rng = np.random.default_rng(1)
    return [torch.from_numpy(rng.standard_normal((1, heads, g.tokens, 16)).astype(np.float32))
            for _ in range(3)]


@pytest.mark.parametrize("granularity", ["token", "tile"])
def test_a_routed_layer_with_the_sink_makes_one_call_per_row_order(calls, granularity):
    g = VideoGeometry(3, 5, 7)
    layer = VideoAttention(g, method="svg", density=0.3, sink=True, backend="flex",
                           granularity=granularity, block_q=64, block_kv=64, samples=12)
    names = [name for name, _ in layer.candidates]
    assert layer.candidate_run("temporal")["extra"] is not None  # the sink is a segment
    q, k, v = _inputs(g)
    for step in range(2):  # a new layer and step each call: every lane runs each time
        calls.clear()
        _, _, report = layer(q, k, v, layer=step, step=step, layout="bhnd", return_lse=True)
        assert len(calls) == len(_orders(layer, names)) == 2, calls
        assert report["kernels"].keys() == {"triton"}


@pytest.mark.parametrize("padded", [False, True])
def test_forced_temporal_heads_with_the_sink_make_one_call(calls, padded):
    g = VideoGeometry(3, 5, 7, text=11, text_at="after")
    layer = VideoAttention(g, method="svg", density=0.3, sink=True, backend="flex",
                           force="temporal", block_q=64, block_kv=64)
    q, k, v = _inputs(g)
    lengths = [g.tokens - 5] if padded else None
    out, lse, _ = layer(q, k, v, layout="bhnd", return_lse=True, key_lengths=lengths)
    assert len(calls) == 1, calls
    # The call's keys: the band's, padded to a whole block, then the sink's.
    run = layer.candidate_run("temporal")
    assert calls[0] == -(-g.tokens // 64) * 64 + run["extra"]["count"]
    native = VideoAttention(g, method="svg", density=0.3, sink=True, backend="cpu",
                            force="temporal", block_q=64, block_kv=64)
    o1, l1, _ = native(q, k, v, layout="bhnd", return_lse=True, key_lengths=lengths)
    np.testing.assert_allclose(out.numpy(), o1.numpy(), atol=2e-5, rtol=0)
    np.testing.assert_allclose(lse.numpy(), l1.numpy(), atol=2e-5, rtol=2e-6)
