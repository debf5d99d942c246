"""tilesplash.jax.route and VideoSplashAttention.

route() must make the choices tilesplash.VideoAttention makes (same rows,
same MSEs up to float32 rounding, same rule) on the planted workload, for the
Sparse VideoGen pair and for the "mix" candidates under a density budget. The
runner must give, head by head, the float64 reference of the mask each head
was routed to, with temporal heads run in token-major order, the sink as a key
segment and text before or after the video; every choice pattern runs on one
compiled function.
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
from conftest import reference_attention, tolerance  # noqa: E402
from tilesplash import VideoAttention, VideoGeometry  # noqa: E402

KINDS = ["spatial", "temporal", "temporal", "spatial", "temporal"]


def planted(geometry, kinds, d=32, sharpness=12.0, seed=0):
    """[H, N, d] float32 Q = K per head, sharp on the frame (spatial) or the
    patch (temporal); text rows random (as tests/python/test_video.py, with text)."""
    rng = np.random.default_rng(seed)
    n, p = geometry.tokens, geometry.tokens_per_frame
    begin = geometry.text_tokens if geometry.text_at == "before" else 0
    video = np.arange(geometry.video_tokens)
    heads = []
    for kind in kinds:
        groups = geometry.frames if kind == "spatial" else p
        features = rng.standard_normal((groups, d))
        features /= np.linalg.norm(features, axis=1, keepdims=True)
        index = video // p if kind == "spatial" else video % p
        a = np.sqrt(sharpness * np.sqrt(d))
        x = rng.standard_normal((n, d)) / np.sqrt(d)
        x[begin:begin + len(video)] = a * (features[index] + 0.2 * x[begin:begin + len(video)])
        heads.append(x)
    qk = np.stack(heads).astype(np.float32)
    return qk, qk.copy(), rng.standard_normal(qk.shape).astype(np.float32)


@pytest.mark.parametrize("geometry,options", [
    (VideoGeometry(8, 4, 4), {"density": 0.25}),
    (VideoGeometry(6, 4, 6, text=12, text_at="before"), {"density": 0.3, "sink": True}),
    (VideoGeometry(6, 4, 6), {"method": "mix", "density": 0.3, "density_budget": 0.4,
                              "samples": 32, "seed": 5}),
])
def test_route_makes_tilesplash_choices_on_the_planted_workload(geometry, options):
    q, k, v = planted(geometry, KINDS)
    for layer, step in ((0, 0), (3, 7)):
        _, report = VideoAttention(geometry, **options)(q[None], k[None], v[None], layer=layer,
                                                        step=step, layout="bhnd")
        routing = tsj.route(*(jnp.asarray(x) for x in (q, k, v)), geometry, layer=layer,
                            step=step, **options)
        assert list(routing.choices) == [h["choice"] for h in report["heads"]]
        if "method" not in options:
            assert list(routing.choices) == KINDS
        names = [name for name, _ in VideoAttention(geometry, **options).candidates]
        assert list(routing.candidates) == names
        mse = np.asarray(routing.mse)
        for h, head in enumerate(report["heads"]):
            np.testing.assert_allclose(mse[h], [head["mse"][n] for n in names], rtol=1e-3,
                                       atol=1e-7)
        rows = VideoAttention(geometry, **options).sampled_rows(layer, step)
        assert np.array_equal(routing.rows, rows)


def test_token_major_permutation():
    g = VideoGeometry(3, 2, 4, text=5, text_at="before")
    permutation, inverse = tsj.token_major_permutation(g)
    run = VideoAttention(g, sink=True).candidate_run("temporal")
    assert run["order_name"] == "token-major" and np.array_equal(run["order"], permutation)
    frames, per_frame, begin = 3, 8, 5
    for run, original in enumerate(permutation):
        if begin <= run < begin + frames * per_frame:
            p, f = divmod(run - begin, frames)
            assert original == begin + f * per_frame + p
        else:
            assert original == run
    assert np.array_equal(permutation[inverse], np.arange(g.tokens))


def check_heads(out, q, k, v, masks, dtype="f32"):
    n = q.shape[1]
    for h, mask in enumerate(masks):
        ref, _ = reference_attention(q[h:h + 1], k[h:h + 1], v[h:h + 1],
                                     mask.rows(np.arange(n), n))
        vmax = float(np.abs(v[h]).max())
        np.testing.assert_allclose(np.asarray(out[h], np.float64), ref[0], rtol=0,
                                   atol=tolerance(dtype) * vmax, err_msg=str(mask))


@pytest.mark.parametrize("geometry", [VideoGeometry(6, 4, 6, text=12, text_at="before"),
                                      VideoGeometry(5, 3, 8, text=7, text_at="after")])
def test_routed_heads_equal_the_reference_of_their_mask(geometry):
    q, k, v = planted(geometry, KINDS)
    layer = tsj.VideoSplashAttention(geometry, density=0.3, sink=True, block_q=16,
                                     block_kv=128, interpret=True)
    out, routing = layer(*(jnp.asarray(x) for x in (q, k, v)))
    assert list(routing.choices) == KINDS
    assert np.array_equal(routing.token_major, [c == "temporal" for c in KINDS])
    assert routing.run_orders == tuple("token-major" if c == "temporal" else "original"
                                       for c in KINDS)
    check_heads(out, q, k, v, [layer.mask(c) for c in routing.choices])
    # Every choice pattern runs the same compiled function (choices are data).
    from tilesplash.jax._video import _routed_forward

    compiled = _routed_forward._cache_size()
    for force in ("spatial", "temporal"):
        forced = tsj.VideoSplashAttention(geometry, density=0.3, sink=True, block_q=16,
                                          block_kv=128, interpret=True, force=force)
        out, routing = forced(*(jnp.asarray(x) for x in (q, k, v)))
        assert routing is None
        check_heads(out, q, k, v, [forced.mask(force)] * len(KINDS))
    shuffled = [KINDS[i] for i in (1, 0, 3, 2, 4)]
    q2, k2, v2 = planted(geometry, shuffled, seed=1)
    out, routing = layer(*(jnp.asarray(x) for x in (q2, k2, v2)), layer=2, step=5)
    assert list(routing.choices) == shuffled
    check_heads(out, q2, k2, v2, [layer.mask(c) for c in shuffled])
    assert _routed_forward._cache_size() == compiled


def test_attend_under_jit_with_a_batch_axis():
    geometry = VideoGeometry(6, 4, 6, text=12, text_at="before")
    first, second = planted(geometry, KINDS), planted(geometry, KINDS[::-1], seed=3)
    q, k, v = (jnp.asarray(np.stack([a, b])) for a, b in zip(first, second))  # [2, H, N, d]
    layer = tsj.VideoSplashAttention(geometry, density=0.3, sink=True, block_q=16,
                                     block_kv=128, interpret=True)
    samples = layer.samples(4, 9)  # host work for (layer, step), outside the traced function
    out, index, mse = jax.jit(layer.attend)(q, k, v, samples)
    assert out.shape == q.shape and index.shape == (2, 5) and mse.shape == (2, 5, 2)
    assert [[layer.router.names[i] for i in row] for row in np.asarray(index)] == \
        [KINDS, KINDS[::-1]]
    eager, routing = layer(q, k, v, layer=4, step=9)
    np.testing.assert_array_equal(np.asarray(eager), np.asarray(out))
    assert list(routing.choices) == KINDS + KINDS[::-1]
    for b, (qb, kb, vb) in enumerate((first, second)):
        check_heads(out[b], qb, kb, vb, [layer.mask(c) for c in routing.choices[5 * b:5 * b + 5]])


def test_mix_candidates_without_text_full_and_warmup():
    geometry = VideoGeometry(4, 4, 6, text=8, text_at="after")
    rng = np.random.default_rng(4)
    q, k, v = (rng.standard_normal((4, geometry.tokens, 32)).astype(np.float32)
               for _ in range(3))
    layer = tsj.VideoSplashAttention(geometry, method="mix", density=0.4, sink=True,
                                     text_full=False, dense_layers=1, block_q=16, block_kv=128,
                                     interpret=True)
    names = [name for name, _ in layer.candidates]
    assert "radial" in names and any(n.startswith("sta:") for n in names)
    out, routing = layer(*(jnp.asarray(x) for x in (q, k, v)), layer=1)
    check_heads(out, q, k, v, [layer.mask(c) for c in routing.choices])
    _, report = VideoAttention(geometry, method="mix", density=0.4, sink=True, text_full=False)(
        q[None], k[None], v[None], layer=1, layout="bhnd")
    assert list(routing.choices) == [h["choice"] for h in report["heads"]]
    dense, none = layer(*(jnp.asarray(x) for x in (q, k, v)), layer=0)  # warm-up layer
    assert none is None
    check_heads(dense, q, k, v, [tilesplash.Mask.dense()] * 4)
    dense, index, mse = layer.attend(*(jnp.asarray(x) for x in (q, k, v)), None)
    assert index is None and mse is None
    check_heads(dense, q, k, v, [tilesplash.Mask.dense()] * 4)
    for choice in names:  # each candidate's own run (order, sink segment) against its mask
        forced = tsj.VideoSplashAttention(geometry, method="mix", density=0.4, sink=True,
                                          text_full=False, force=choice, block_q=16,
                                          block_kv=128, interpret=True)
        out, _ = forced(*(jnp.asarray(x) for x in (q, k, v)))
        check_heads(out, q, k, v, [forced.mask(choice)] * 4)


def test_bad_arguments_are_named():
    g = VideoGeometry(4, 4, 6)
    x = jnp.zeros((2, g.tokens, 32))
    with pytest.raises(TypeError, match="geometry"):
        tsj.route(x, x, x, "frames=4")
    with pytest.raises(ValueError, match="q: expected"):
        tsj.route(jnp.zeros((2, 5, 32)), x, x, g)
    with pytest.raises(ValueError, match="method"):
        tsj.route(x, x, x, g, method="nope")
    with pytest.raises(ValueError, match="does not route"):
        tsj.route(x, x, x, g, method="svg2")
    with pytest.raises(ValueError, match="svg2"):
        tsj.VideoSplashAttention(g, method="svg2")
    with pytest.raises(ValueError, match="block_kv"):
        tsj.VideoSplashAttention(g, block_kv=64)
    with pytest.raises(ValueError, match="force"):
        tsj.VideoSplashAttention(g, force="radial")
