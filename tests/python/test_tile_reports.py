"""What a head reports under granularity="tile" is what it ran.

The density is the pairs its rounded masks keep, on both backends at the same tiles:
the rounded band plus the rounded first-frame sink segment stripped of the band's
pairs. A temporal head's sink keys (every F-th key in token-major order) sit inside
the band's tiles, whose pairs must not count twice; tiles_visited, the kernel's work,
still counts the segment's partial tiles whole. summarize() reads the same figure.

head_mask(h) of an svg2 head (native) is the cluster mask rounded out as it ran, in
its run order: attention under that mask is the head's output."""

from __future__ import annotations

import numpy as np
import pytest

from tilesplash import VideoAttention, VideoGeometry

torch = pytest.importorskip("torch")


def rounded(keep, block):
    q_len, kv_len = keep.shape
    qt, kt = -(-q_len // block), -(-kv_len // block)
    padded = np.zeros((qt * block, kt * block), bool)
    padded[:q_len, :kv_len] = keep
    tiles = padded.reshape(qt, block, kt, block).any(axis=(1, 3))
    return np.repeat(np.repeat(tiles, block, 0), block, 1)[:q_len, :kv_len]


def kept_pairs(va, name, block):
    """Pairs the candidate keeps at tile granularity, from candidate_run() in NumPy."""
    run = va.candidate_run(name)
    n = va.geometry.tokens
    exact = lambda mask, kv: np.asarray(mask.rows(np.arange(n), kv, n), bool)  # noqa: E731
    keep = rounded(exact(run["run_mask"], n), block)
    if run["extra"] is not None:
        e = run["extra"]
        keys = e["first"] + np.arange(e["count"]) * e["stride"]
        keep[:, keys] |= rounded(exact(e["mask"], e["count"]), block)
    return int(keep.sum())


@pytest.mark.parametrize("geometry", [(3, 5, 7), (4, 8, 8), (5, 6, 9)])
@pytest.mark.parametrize("name", ["temporal", "spatial"])
@pytest.mark.parametrize("sink", [True, False])
@pytest.mark.parametrize("backend", ["cpu", "flex"])
def test_tile_density_counts_each_kept_pair_once(geometry, name, sink, backend):
    g = VideoGeometry(*geometry)
    n = g.tokens
    va = VideoAttention(g, method="svg", density=0.3, sink=sink, granularity="tile", block_q=64,
                        block_kv=64, backend=backend, force=name)
    rng = np.random.default_rng(0)
    q, k, v = (torch.tensor(rng.standard_normal((1, n, 2, 16)), dtype=torch.float32)
               for _ in range(3))
    _, report = va(q, k, v)
    expected = kept_pairs(va, name, 64) / (n * n)
    for head in report["heads"]:
        assert head["density"] == pytest.approx(expected, abs=1e-12)
        assert head["tiles_visited"] >= head["density"] - 1e-12
    pytest.importorskip("diffusers")
    from tilesplash.diffusers import summarize
    assert summarize([dict(report, step=0)])[0]["density"] == pytest.approx(expected, abs=1e-12)


def reference(q, k, v, keep):
    """float64 softmax attention of [H, N, d] arrays under keep [N, N]."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = np.where(keep[None], q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1]), -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True) @ v


@pytest.mark.parametrize("granularity", ["tile", "token"])
def test_svg2_head_mask_is_the_mask_the_head_ran(granularity):
    g = VideoGeometry(4, 8, 8)
    n = g.tokens
    va = VideoAttention(g, method="svg2", density=0.25, granularity=granularity, backend="cpu")
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 2, n, 32)).astype(np.float32) for _ in range(3))
    out, report = va(q, k, v, layout="bhnd")
    for h in range(2):
        mask = va.head_mask(h)
        keep = np.asarray(mask.rows(np.arange(n), n, n), bool)
        np.testing.assert_allclose(out[0, h], reference(q[0], k[0], v[0], keep)[h], atol=2e-5,
                                   rtol=0)
        assert report["heads"][h]["density"] == pytest.approx(keep.sum() / (n * n), abs=1e-12)
