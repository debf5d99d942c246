"""compensate=True on the JAX bridge (issue 35, part 1): the skipped tiles' pooled term
in jax.numpy (tilesplash/jax/_compensation.py) against the native pass.

- Splash's lse convention: natural log-sum-exp of the scaled scores (any scale);
- splash_attention(compensate=True) against tilesplash.attention(compensate=True)
  on the native kernel over masks x lengths (ragged) x blocks, grouped kv heads
  against the float64 definition, bf16 within its rounding;
- every tile kept: bit for bit the uncompensated output; a skipped tile of one
  repeated key: exact attention over it; chunks change no bit;
- VideoSplashAttention(compensate=True) against tilesplash.VideoAttention(...,
  compensate=True) (methods x sink x text): outputs, choices and the router's
  MSEs (which score the compensated candidates), an error target included;
  under jax.jit as eagerly; route(compensate=True) scores as native's router.
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
from conftest import mask_matrix, reference_attention, tolerance  # noqa: E402
from test_compensation import compensated_reference  # noqa: E402
from test_jax_route import KINDS, planted  # noqa: E402
from tilesplash import Mask, VideoAttention, VideoGeometry  # noqa: E402
from tilesplash.jax import _compensation  # noqa: E402


def _arrays(*xs):
    return [jnp.asarray(x) for x in xs]


def _splash(mask, n, q, k, v, block_q, block_kv, compensate, **kw):
    attend = tsj.splash_attention(mask, n, block_q=block_q, block_kv=block_kv, interpret=True,
                                  compensate=compensate, **kw)
    out, lse = attend(*_arrays(q, k, v), return_lse=True)
    return np.asarray(out), np.asarray(lse)


def test_splash_lse_is_the_natural_log_sum_exp_of_the_scaled_scores():
    """What the merge relies on: Splash's residual is m + log(l) (natural log) of the
    scores it is given, and splash_attention hands it q * scale, so lse is tilesplash's
    (the native kernel's) for any scale, not log2 and not unscaled."""
    rng = np.random.default_rng(0)
    n = 256
    q, k, v = (rng.standard_normal((2, n, 32)).astype(np.float32) for _ in range(3))
    mask = Mask.local(60, 60)
    for scale in (None, 0.3):
        _, lse = _splash(mask, n, q, k, v, 64, 128, False, scale=scale)
        _, ref = reference_attention(q, k, v, mask_matrix(mask, n, n), scale=scale)
        np.testing.assert_allclose(lse, ref, atol=2e-5, rtol=0)
        _, native = tilesplash.attention(q, k, v, mask=mask, layout="hnd", scale=scale,
                                         return_lse=True)
        np.testing.assert_allclose(lse, native, atol=2e-5, rtol=0)


MASKS = {"local": Mask.local(100, 100), "causal": Mask.causal(),
         "chunked": Mask.chunked(96)}


@pytest.mark.parametrize("n,block_q,block_kv", [(512, 64, 128), (511, 32, 128),
                                                 (700, 64, 256)],
                         ids=["tiles", "minus1", "ragged"])
@pytest.mark.parametrize("name", list(MASKS))
def test_splash_attention_agrees_with_native(name, n, block_q, block_kv):
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((2, n, 32)).astype(np.float32) for _ in range(3))
    mask = MASKS[name]
    out, lse = _splash(mask, n, q, k, v, block_q, block_kv, True)
    native, native_lse = tilesplash.attention(q, k, v, mask=mask, layout="hnd",
                                              block_q=block_q, block_kv=block_kv,
                                              compensate=True, return_lse=True)
    np.testing.assert_allclose(out, native, atol=2e-6, rtol=0)
    np.testing.assert_allclose(lse, native_lse, atol=2e-6, rtol=1e-6)
    plain, _ = _splash(mask, n, q, k, v, block_q, block_kv, False)
    assert np.abs(plain - native).max() > 1e-3  # the term is there


def test_grouped_kv_heads_and_rectangular_against_the_definition():
    """Four q heads on two kv heads (h -> h // 2, as Splash maps them), q_len != kv_len:
    each q head pools its kv head's tiles."""
    rng = np.random.default_rng(2)
    q = rng.standard_normal((4, 200, 16)).astype(np.float32)
    k, v = (rng.standard_normal((2, 400, 16)).astype(np.float32) for _ in range(2))
    mask = Mask.local(40, 40)
    attend = tsj.splash_attention(mask, 200, 400, block_q=32, block_kv=128, interpret=True,
                                  compensate=True)
    out, lse = (np.asarray(x) for x in attend(*_arrays(q, k, v), return_lse=True))
    ref_out, ref_lse = compensated_reference(q, np.repeat(k, 2, 0), np.repeat(v, 2, 0),
                                             mask_matrix(mask, 200, 400), 32, 128)
    np.testing.assert_allclose(out, ref_out, atol=2e-6, rtol=0)
    np.testing.assert_allclose(lse, ref_lse, atol=2e-6, rtol=1e-6)


def test_bf16_agrees_with_native_within_its_rounding():
    import ml_dtypes

    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, 384, 32)).astype(ml_dtypes.bfloat16) for _ in range(3))
    out, _ = _splash(MASKS["local"], 384, q, k, v, 64, 128, True)
    native = tilesplash.attention(q, k, v, mask=MASKS["local"], layout="hnd", block_q=64,
                                  block_kv=128, compensate=True)
    assert out.dtype == ml_dtypes.bfloat16
    np.testing.assert_allclose(out.astype(np.float32), native.astype(np.float32), atol=2e-2)


@pytest.mark.parametrize("mask", [Mask.dense(), Mask.local(200, 200)], ids=["dense", "wide"])
def test_every_tile_kept_is_bit_identical(mask):
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((2, 300, 16)).astype(np.float32) for _ in range(3))
    plain = _splash(mask, 300, q, k, v, 64, 128, False)
    same = _splash(mask, 300, q, k, v, 64, 128, True)
    assert np.array_equal(plain[0], same[0]) and np.array_equal(plain[1], same[1])


def test_compensate_leaves_visited_blocks_and_empty_rows_alone():
    """compensate() itself: every tile visited changes no bit, rows with no kept key
    (out 0, lse -inf) included; a q-block that skips tiles changes, the others not."""
    rng = np.random.default_rng(5)
    q, k, v = _arrays(*(rng.standard_normal((2, 130, 8)).astype(np.float32) for _ in range(3)))
    out = jnp.asarray(rng.standard_normal((2, 130, 8)).astype(np.float32)).at[:, :20].set(0)
    lse = jnp.asarray(rng.standard_normal((2, 130)).astype(np.float32)).at[:, :20].set(-np.inf)
    pooled = _compensation.pooled_tiles(k, v, 64)
    visited = np.ones((1, 5, 3), bool)
    o, l = _compensation.compensate(q, out, lse, pooled, jnp.asarray(visited), 0.3, 32)
    assert np.array_equal(np.asarray(o), np.asarray(out))
    assert np.array_equal(np.asarray(l), np.asarray(lse))
    visited[0, 0, 2] = False  # q-block 0 (rows 0..31, 20 of them with no kept key) skips
    o, l = (np.asarray(x) for x in _compensation.compensate(q, out, lse, pooled,
                                                            jnp.asarray(visited), 0.3, 32))
    assert np.array_equal(o[:, 32:], np.asarray(out)[:, 32:])
    assert np.isfinite(l[:, :20]).all() and np.isfinite(o).all()
    # A row with no kept key gets exactly the skipped tile's mean value.
    np.testing.assert_allclose(o[:, :20], np.broadcast_to(np.asarray(pooled[1])[:, 2:3],
                                                          (2, 20, 8)), atol=1e-6)


def test_a_tile_of_one_repeated_key_is_exact():
    """Keys [128, 256) one repeated key with any values, skipped by every row: the
    compensated output is exact (dense) attention, as the tile's keys score alike."""
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((2, 384, 16)).astype(np.float32) for _ in range(3))
    k[:, 128:256] = k[:, 128:129]
    mask = Mask.key_range(0, 128) | Mask.key_range(256, 384)
    out, lse = _splash(mask, 384, q, k, v, 64, 128, True)
    dense_out, dense_lse = reference_attention(q, k, v, np.ones((384, 384), bool))
    np.testing.assert_allclose(out, dense_out, atol=2e-6)
    np.testing.assert_allclose(lse, dense_lse, atol=2e-6)
    pooled = _compensation.pooled_tiles(*_arrays(k, v), 128)
    assert np.array_equal(np.asarray(pooled[0])[:, 1], k[:, 128])  # pooled to that key
    dropped, _ = _splash(mask, 384, q, k, v, 64, 128, False)
    assert np.abs(dropped - dense_out).max() > 1e-2  # the tile mattered


def test_chunks_do_not_change_the_bits(monkeypatch):
    rng = np.random.default_rng(7)
    q, k, v = _arrays(*(rng.standard_normal((3, 300, 8)).astype(np.float32) for _ in range(3)))
    keep = jnp.asarray(rng.random((3, 300)) < 0.7)
    out = jnp.asarray(rng.standard_normal((3, 300, 8)).astype(np.float32))
    lse = jnp.asarray(rng.standard_normal((3, 300)).astype(np.float32))
    visited = jnp.asarray(rng.random((3, 10, 3)) < 0.4)
    pooled = _compensation.pooled_tiles(k, v, 128, keep)
    whole = _compensation.compensate(q, out, lse, pooled, visited, 0.3, 32)
    monkeypatch.setattr(_compensation, "_CHUNK_ELEMENTS", 700)  # 1 q-block a step
    chunked = _compensation.compensate(q, out, lse, pooled, visited, 0.3, 32)
    for a, b in zip(whole, chunked):
        assert np.array_equal(np.asarray(a), np.asarray(b))


CASES = [
    (VideoGeometry(8, 4, 16), {"density": 0.25}),
    (VideoGeometry(6, 4, 16, text=20, text_at="before"), {"density": 0.3, "sink": True}),
    (VideoGeometry(5, 4, 16, text=9, text_at="after"), {"density": 0.3, "sink": True}),
    (VideoGeometry(6, 4, 16), {"method": "mix", "density": 0.3, "density_budget": 0.5,
                               "samples": 32, "seed": 5}),
    (VideoGeometry(8, 4, 16), {"density": 0.25, "force": "temporal"}),
]


def _layers(geometry, options, **extra):
    """The JAX layer and the native one, same options and tiles (64 x 128)."""
    jax_layer = tsj.VideoSplashAttention(geometry, block_q=64, block_kv=128, interpret=True,
                                         **options, **extra)
    native = VideoAttention(geometry, block_q=64, block_kv=128, **options, **extra)
    return jax_layer, native


@pytest.mark.parametrize("geometry,options", CASES,
                         ids=["svg", "sink_text_before", "sink_text_after", "mix", "temporal"])
def test_video_layer_agrees_with_native(geometry, options):
    q, k, v = planted(geometry, KINDS)
    layer, native = _layers(geometry, options, compensate=True)
    out, routing = layer(*_arrays(q, k, v), layer=1, step=2)
    ref, report = native(q[None], k[None], v[None], layout="bhnd", layer=1, step=2)
    # The planted heads' sharp scores: float32 rounding per unit of max|V|, as the
    # uncompensated runner is held to (test_jax_route.check_heads).
    np.testing.assert_allclose(np.asarray(out), ref[0], atol=tolerance("f32") * np.abs(v).max(),
                               rtol=0)
    assert all(h["compensated"] for h in report["heads"])
    if routing is None:  # forced
        return
    assert list(routing.choices) == [h["choice"] for h in report["heads"]]
    names = layer.router.names
    mse = np.asarray(routing.mse)
    expected = np.array([[h["mse"][name] for name in names] for h in report["heads"]])
    np.testing.assert_allclose(mse, expected, rtol=1e-3, atol=1e-7)
    # The router scored the compensated candidates, not the dropped ones.
    plain_layer, _ = _layers(geometry, options)
    _, plain = plain_layer(*_arrays(q, k, v), layer=1, step=2)
    assert not np.allclose(np.asarray(plain.mse), mse, rtol=1e-2)


def test_error_target_choices_agree_with_native():
    """With an error target the router scores the compensated candidates, so a head
    whose skipped part is well approximated meets the target at a lower rung; the JAX
    router picks what the native one picks."""
    geometry = VideoGeometry(8, 4, 16)
    q, k, v = planted(geometry, KINDS, sharpness=4.0)
    # 64 sampled rows (the row rule would take 16 at 512 tokens): enough for the
    # compensated and the dropped choices to differ as the planted tails say.
    options = {"density": 0.25, "error": 0.1, "densities": [0.125, 0.25, 0.5], "samples": 64}
    layer, native = _layers(geometry, options, compensate=True)
    out, routing = layer(*_arrays(q, k, v))
    ref, report = native(q[None], k[None], v[None], layout="bhnd")
    assert list(routing.choices) == [h["choice"] for h in report["heads"]]
    np.testing.assert_allclose(np.asarray(out), ref[0], atol=tolerance("f32") * np.abs(v).max(),
                               rtol=0)
    _, dropped = _layers(geometry, options)[1](q[None], k[None], v[None], layout="bhnd")
    rungs = [[float(h["choice"].split("@")[1]) for h in r["heads"]] for r in (report, dropped)]
    assert rungs[0] != rungs[1] and all(a <= b for a, b in zip(*rungs)), rungs


def test_route_scores_compensated_candidates_like_native():
    geometry = VideoGeometry(6, 4, 16, text=20, text_at="before")
    q, k, v = planted(geometry, KINDS, sharpness=4.0)
    options = {"density": 0.3, "sink": True}
    routing = tsj.route(*_arrays(q, k, v), geometry, compensate=True, block_q=64, block_kv=128,
                        **options)
    _, report = VideoAttention(geometry, block_q=64, block_kv=128, compensate=True, **options)(
        q[None], k[None], v[None], layout="bhnd")
    assert list(routing.choices) == [h["choice"] for h in report["heads"]]
    expected = np.array([[h["mse"][name] for name in routing.candidates]
                         for h in report["heads"]])
    np.testing.assert_allclose(np.asarray(routing.mse), expected, rtol=1e-3, atol=1e-7)
    with pytest.raises(ValueError, match="block_q, block_kv"):
        tsj.route(*_arrays(q, k, v), geometry, compensate=True, **options)
    with pytest.raises(ValueError, match="block_q, block_kv"):
        tsj.route(*_arrays(q, k, v), geometry, block_q=64, block_kv=128, **options)


def test_attend_under_jit_equals_eager_and_warmup_is_plain():
    geometry = VideoGeometry(6, 4, 16, text=20, text_at="before")
    q, k, v = _arrays(*planted(geometry, KINDS))
    layer = tsj.VideoSplashAttention(geometry, density=0.3, sink=True, block_q=64,
                                     block_kv=128, interpret=True, compensate=True,
                                     dense_layers=1)
    samples = layer.samples(2, 3)
    out, index, mse = jax.jit(layer.attend)(q, k, v, samples)
    eager, routing = layer(q, k, v, layer=2, step=3)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(eager))
    np.testing.assert_array_equal(np.asarray(index), np.asarray(routing.index))
    # Another choice pattern, compensated, runs the same compiled function.
    from tilesplash.jax._video import _routed_forward

    compiled = _routed_forward._cache_size()
    shuffled = [KINDS[i] for i in (1, 0, 3, 2, 4)]
    _, other = layer(*_arrays(*planted(geometry, shuffled, seed=1)), layer=2, step=3)
    assert list(other.choices) == shuffled and list(routing.choices) == KINDS
    assert _routed_forward._cache_size() == compiled
    warm, none = layer(q, k, v, layer=0)  # dense warm-up: nothing skipped, nothing added
    assert none is None
    plain = tsj.VideoSplashAttention(geometry, density=0.3, sink=True, block_q=64,
                                     block_kv=128, interpret=True, dense_layers=1)
    assert np.array_equal(np.asarray(warm), np.asarray(plain(q, k, v, layer=0)[0]))


def test_refusals_name_the_argument():
    g = VideoGeometry(4, 4, 8)
    with pytest.raises(TypeError, match="compensate"):
        tsj.VideoSplashAttention(g, compensate="yes")
    with pytest.raises(TypeError, match="compensate"):
        tsj.splash_attention(Mask.causal(), 256, block_q=64, block_kv=128, compensate=1)
