"""tilesplash.jax.splash_attention: Splash's Pallas kernel (interpret mode, any
JAX backend) driven by tilesplash plans, against the float64 reference and
tilesplash's own CPU kernel, for every mask family, float32 and bfloat16.

Pallas' interpreter compiles once per shape, so the families run as the heads
of one call (one MaskInfo entry per head), on ragged lengths (padded to whole
blocks inside) with rows that keep no key (text rows of a mask without
text_full), and a shared mask runs on the shrunk grid.
"""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip(
    "jax", reason="JAX is not installed (pip install 'tilesplash[jax]'; scripts/setup --tests "
    "installs it)")

import jax.numpy as jnp  # noqa: E402

import tilesplash  # noqa: E402
import tilesplash.jax as tsj  # noqa: E402
from conftest import numpy_dtype, reference_attention, tolerance  # noqa: E402
from tilesplash import Mask, VideoGeometry  # noqa: E402

G = VideoGeometry(3, 4, 8, text=20, text_at="after")  # 116 tokens: ragged for every block
D = 64  # scale 1/8: exact in bfloat16, so q * scale adds no rounding


def families(g):
    return [
        Mask.dense(), Mask.causal(), Mask.local(9, 30), Mask.chunked(24), Mask.random(0.3, 5),
        Mask.spatial(g, 10, sink=True, text_full=True),
        Mask.spatial(g, 7, text_full=False),          # text rows keep no key: out 0, lse -inf
        Mask.temporal(g, 9, sink=True, text_full=True),
        Mask.temporal(g, 12, text_full=False),
        Mask.radial(g, 0.5, block=8, sink=True),
        Mask.sta(g, window=(1, 3, 3), tile=(1, 2, 4)),
        Mask.causal(-30),                              # the first 30 rows keep no key
    ]


def inputs(rng, heads, n, dtype):
    t = numpy_dtype(dtype)
    return [rng.standard_normal((heads, n, D)).astype(np.float32).astype(t) for _ in range(3)]


def check(out, lse, q, k, v, keep, dtype):
    vmax = float(np.abs(v.astype(np.float64)).max())
    ref, ref_lse = reference_attention(q[None], k[None], v[None], keep)
    np.testing.assert_allclose(out.astype(np.float64), ref[0], rtol=0, atol=tolerance(dtype) * vmax)
    finite = np.isfinite(ref_lse[0])
    assert np.array_equal(np.isfinite(lse), finite)
    np.testing.assert_allclose(lse[finite], ref_lse[0][finite], rtol=2e-6, atol=2e-5)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_every_family_against_the_reference_and_tilesplash(dtype):
    masks = families(G)
    n = G.tokens
    q, k, v = inputs(np.random.default_rng(1), len(masks), n, dtype)
    jdt = jnp.float32 if dtype == "f32" else jnp.bfloat16
    attend = tsj.splash_attention(masks, n, block_q=32, block_kv=128, interpret=True)
    out, lse = attend(*(jnp.asarray(x, jdt) for x in (q, k, v)), return_lse=True)
    assert out.dtype == jdt and out.shape == (len(masks), n, D) and lse.dtype == jnp.float32
    out = np.asarray(out.astype(jnp.float32))
    lse = np.asarray(lse)
    for h, mask in enumerate(masks):
        keep = mask.rows(np.arange(n), n)
        check(out[h], lse[h], q[h], k[h], v[h], keep, dtype)
        native = tilesplash.attention(q[None, h:h + 1], k[None, h:h + 1], v[None, h:h + 1],
                                      mask=mask, layout="bhnd")[0, 0].astype(np.float32)
        vmax = float(np.abs(v[h].astype(np.float64)).max())
        np.testing.assert_allclose(out[h], native, rtol=0, atol=2 * tolerance(dtype) * vmax,
                                   err_msg=str(mask))
        if not keep.any(axis=1).all():
            assert np.all(out[h][~keep.any(axis=1)] == 0)


def test_one_shared_mask_runs_on_the_shrunk_grid_with_grouped_heads():
    n, kv = 200, 300  # rectangular and ragged
    mask = Mask.local(40, 60) | Mask.causal(-150)
    attend = tsj.splash_attention(mask, n, kv, block_q=64, block_kv=128, interpret=True)
    assert attend.mask_info.block_mask.shape[0] == 1
    rng = np.random.default_rng(2)
    q = rng.standard_normal((4, n, D)).astype(np.float32)
    k, v = (rng.standard_normal((2, kv, D)).astype(np.float32) for _ in range(2))
    out, lse = attend(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v), return_lse=True)
    keep = mask.rows(np.arange(n), kv, n)
    for h in range(4):  # heads 0, 1 share kv head 0; heads 2, 3 kv head 1
        check(np.asarray(out[h]), np.asarray(lse[h]), q[h], k[h // 2], v[h // 2], keep, "f32")


def test_scale_convention():
    n = 64
    rng = np.random.default_rng(3)
    q, k, v = (jnp.asarray(rng.standard_normal((1, n, D)).astype(np.float32)) for _ in range(3))
    default = tsj.splash_attention("causal", n, block_q=32, block_kv=128, interpret=True)
    splash_one = tsj.splash_attention("causal", n, block_q=32, block_kv=128, scale=1.0,
                                      interpret=True)
    # Splash's own convention (scale 1) on q / sqrt(d) is tilesplash's default.
    np.testing.assert_allclose(np.asarray(default(q, k, v)),
                               np.asarray(splash_one(q / np.sqrt(D), k, v)), rtol=0, atol=1e-6)
    keep = Mask.causal().rows(np.arange(n), n)
    ref, _ = reference_attention(np.asarray(q), np.asarray(k), np.asarray(v), keep, scale=1.0)
    np.testing.assert_allclose(np.asarray(splash_one(q, k, v))[0], ref[0], rtol=0, atol=1e-5)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="block_kv"):
        tsj.splash_attention("causal", 64, block_q=32, block_kv=64)
    with pytest.raises(ValueError, match="block_q"):
        tsj.splash_attention("causal", 64, block_q=12, block_kv=128)
    with pytest.raises(ValueError, match="scale"):
        tsj.splash_attention("causal", 64, block_q=32, block_kv=128, scale=0.0)
    with pytest.raises(TypeError, match="interpret"):
        tsj.splash_attention("causal", 64, block_q=32, block_kv=128, interpret="yes")
    attend = tsj.splash_attention(["causal", "dense"], 64, block_q=32, block_kv=128,
                                  interpret=True)
    x = jnp.zeros((2, 64, D), jnp.float32)
    with pytest.raises(ValueError, match="q: expected 64 rows"):
        attend(jnp.zeros((2, 65, D)), x, x)
    with pytest.raises(ValueError, match="per-head masks are for 2 heads"):
        attend(jnp.zeros((3, 64, D)), x[:1], x[:1])
    with pytest.raises(TypeError, match="dtypes"):
        attend(x, x.astype(jnp.bfloat16), x)
    with pytest.raises(ValueError, match="head dim"):
        attend(x, jnp.zeros((2, 64, 32)), x)
    with pytest.raises(TypeError, match="q: expected a jax.Array"):
        attend([1, 2], x, x)


def test_svg2_cluster_masks_per_head():
    # Sparse VideoGen 2 clusters every head on tilesplash's CPU; its per-head
    # masks then run on Splash's kernel as a per-head MaskInfo.
    g = VideoGeometry(4, 4, 6, text=8, text_at="before")
    n, heads = g.tokens, 3
    q, k, v = inputs(np.random.default_rng(6), heads, n, "f32")
    layer = tilesplash.VideoAttention(g, method="svg2", density=0.3)
    native, report = layer(q[None], k[None], v[None], layout="bhnd")
    assert {h["choice"] for h in report["heads"]} == {"svg2"}
    masks = [layer.head_mask(h) for h in range(heads)]
    attend = tsj.splash_attention(masks, n, block_q=32, block_kv=128, interpret=True)
    out, lse = attend(*(jnp.asarray(x) for x in (q, k, v)), return_lse=True)
    for h, mask in enumerate(masks):
        check(np.asarray(out[h]), np.asarray(lse[h]), q[h], k[h], v[h],
              mask.rows(np.arange(n), n), "f32")
    vmax = float(np.abs(v).max())
    np.testing.assert_allclose(np.asarray(out), native[0], rtol=0,
                               atol=2 * tolerance("f32") * vmax)
