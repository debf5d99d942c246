"""compensate=True on the flex backend (issue 35, part 1): the skipped tiles' pooled term
in torch ops (_torch_video/compensation.py) against its definition and the native pass.

- every tile kept: bit for bit the uncompensated output;
- a skipped tile of one repeated key: its term is exact attention over that tile;
- tilesplash.attention against a float64 reference over masks x lengths (ragged, a
  tile and one key more or less) x dtypes;
- VideoAttention on flex against native (methods x sink x text x key padding, tile
  granularity): outputs, LSEs, choices (the router scores the compensated outputs)
  and the "compensated" flags;
- planted heads with smooth tails: the error against dense drops >= 2x (geometric
  mean) at densities 0.25 and 0.10, and no head gets worse.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import tilesplash
from tilesplash import Mask, VideoAttention, VideoGeometry
from conftest import mask_matrix, reference_attention
from test_compensation import compensated_reference
from test_flex_tile_agreement import layer_pair

torch = pytest.importorskip("torch")
from tilesplash._torch_video.compensation import (  # noqa: E402
    compensate, pooled_tiles, visited_tiles)


def _tensors(*arrays, dtype=torch.float32):
    return [torch.from_numpy(np.ascontiguousarray(x)).to(dtype) for x in arrays]


def _flex(q, k, v, mask, compensate, block_q=32, block_kv=64, **kw):
    return tilesplash.attention(q, k, v, mask=mask, layout="hnd", block_q=block_q,
                                block_kv=block_kv, backend="flex", compensate=compensate,
                                return_lse=True, **kw)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("mask", [Mask.dense(), Mask.local(70, 70)], ids=["dense", "wide"])
def test_every_tile_kept_is_bit_identical(dtype, mask):
    """A plan that visits every tile (dense; a band wider than a tile reaches every key
    tile from every q-block at this length) leaves FlexAttention's bits alone."""
    rng = np.random.default_rng(0)
    q, k, v = _tensors(*(rng.standard_normal((2, 100, 16)) for _ in range(3)), dtype=dtype)
    plain, plain_lse = _flex(q, k, v, mask, False)
    same, same_lse = _flex(q, k, v, mask, True)
    assert same.dtype == dtype
    assert torch.equal(plain, same) and torch.equal(plain_lse, same_lse)


def test_every_tile_visited_leaves_the_bits_for_any_visited_table():
    """compensate() itself: a visited table of every tile changes nothing, even for rows
    with no kept key (out 0, lse -inf stay)."""
    rng = np.random.default_rng(1)
    q, k, v = _tensors(*(rng.standard_normal((1, 2, 130, 8)) for _ in range(3)))
    out = torch.zeros(1, 2, 130, 8)
    lse = torch.full((1, 2, 130), -math.inf)
    pooled = pooled_tiles(k, v, 64)
    visited = torch.ones(1, 1, 5, 3, dtype=torch.bool)
    o, l = compensate(q, out, lse, pooled, visited, 0.3, 32)
    assert torch.equal(o, out) and torch.equal(l, lse)


def test_a_tile_of_one_repeated_key_is_exact():
    """Keys [64, 128) one repeated key with any values, skipped by every row: the
    compensated output is exact (dense) attention, since the tile's keys score alike."""
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((2, 192, 16)) for _ in range(3))
    k[:, 64:128] = k[:, 64:65]
    mask = Mask.key_range(0, 64) | Mask.key_range(128, 192)
    out, lse = _flex(*_tensors(q, k, v), mask, True)
    dense_out, dense_lse = reference_attention(q, k, v, np.ones((192, 192), bool))
    np.testing.assert_allclose(out.numpy(), dense_out, atol=2e-6)
    np.testing.assert_allclose(lse.numpy(), dense_lse, atol=2e-6)
    dropped, _ = _flex(*_tensors(q, k, v), mask, False)
    assert np.abs(dropped.numpy() - dense_out).max() > 1e-2  # the tile mattered


MASKS = {"local": Mask.local(20, 20), "causal": Mask.causal(),
         "chunked": Mask.chunked(48), "random": Mask.random(0.3, seed=1)}


@pytest.mark.parametrize("length", [192, 191, 193, 100], ids=["tiles", "minus1", "plus1", "ragged"])
@pytest.mark.parametrize("name", list(MASKS))
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_against_the_float64_definition(name, length, dtype):
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((2, length, 16)).astype(np.float32) for _ in range(3))
    torch_dtype = torch.float32 if dtype == "f32" else torch.bfloat16
    tq, tk, tv = _tensors(q, k, v, dtype=torch_dtype)
    out, lse = _flex(tq, tk, tv, MASKS[name], True)
    # The reference sees the inputs as the call does (rounded to bf16 there).
    q, k, v = (x.double().numpy() for x in (tq, tk, tv))
    ref_out, ref_lse = compensated_reference(q, k, v, mask_matrix(MASKS[name], length, length),
                                             32, 64)
    atol = 2e-5 if dtype == "f32" else 2e-2
    np.testing.assert_allclose(out.float().numpy(), ref_out, atol=atol, rtol=0)
    finite = np.isfinite(ref_lse)
    np.testing.assert_array_equal(np.isfinite(lse.numpy()), finite)
    np.testing.assert_allclose(lse.numpy()[finite], ref_lse[finite], atol=2e-5, rtol=2e-6)


def test_visited_tiles_read_the_block_lists():
    """The visited table is the plan's: full and partial tiles of the BlockMask."""
    from tilesplash._flex.masks import block_mask_for
    from tilesplash._flex.tables import plan_tables

    mask = Mask.local(20, 20)
    block_mask = block_mask_for(mask, 200, 200, 32, 64, torch.device("cpu"))
    visited = visited_tiles(block_mask, 4)[0, 0].numpy()
    np.testing.assert_array_equal(visited, plan_tables(mask, 200, 200, 32, 64).tiles != 0)


CASES = [("svg", "spatial"), ("svg", "temporal"), ("svg", None), ("radial", None),
         ("sta", None), ("mix", None)]


@pytest.mark.parametrize("method,force", CASES)
@pytest.mark.parametrize("sink", [False, True], ids=["no_sink", "sink"])
@pytest.mark.parametrize("text", [False, True], ids=["video", "text"])
@pytest.mark.parametrize("padded", [False, True], ids=["all_keys", "key_padding"])
def test_flex_and_native_compensate_alike(method, force, sink, text, padded):
    g = VideoGeometry(5, 6, 8, text=11, text_at="after") if text else VideoGeometry(5, 6, 8)
    native, flex = layer_pair(g, method, force, sink, compensate=True)
    rng = np.random.default_rng(4)
    q, k, v = _tensors(*(rng.standard_normal((2, 2, g.tokens, 16)) for _ in range(3)))
    lengths = None
    if padded:  # padding needs trailing text; without text the limit is every key
        lengths = [g.tokens - 5, g.tokens] if text else [g.tokens, g.tokens]
    o1, l1, r1 = native(q, k, v, layout="bhnd", return_lse=True, key_lengths=lengths)
    o2, l2, r2 = flex(q, k, v, layout="bhnd", return_lse=True, key_lengths=lengths)
    assert [h["choice"] for h in r2["heads"]] == [h["choice"] for h in r1["heads"]]
    np.testing.assert_allclose(o2.numpy(), o1.numpy(), atol=2e-5, rtol=0)
    np.testing.assert_allclose(l2.numpy(), l1.numpy(), atol=2e-5, rtol=2e-6)
    assert [h["compensated"] for h in r2["heads"]] == [h["compensated"] for h in r1["heads"]]
    if method == "svg":  # denser plans (radial, sta under the budget) may skip no tile here
        assert any(h["compensated"] for h in r2["heads"])


def test_svg2_compensates_in_its_clusters_order():
    """svg2 on flex: its own clusters' plan (run order: the clusters'), compensated in
    that call where it skips tiles, each head's report saying so."""
    g = VideoGeometry(8, 8, 16)
    rng = np.random.default_rng(5)
    q, k, v = _tensors(*(rng.standard_normal((1, 2, g.tokens, 16)) for _ in range(3)))
    runs = {}
    for flag in (False, True):
        layer = VideoAttention(g, method="svg2", density=0.1, backend="flex", block_q=64,
                               block_kv=64, compensate=flag)
        runs[flag] = layer(q, k, v, layout="bhnd")
    (plain, plain_report), (out, report) = runs[False], runs[True]
    assert all(h["tiles_visited"] < 1.0 for h in report["heads"])
    assert all(h["compensated"] for h in report["heads"])
    assert not any(h["compensated"] for h in plain_report["heads"])
    assert torch.isfinite(out).all() and (out - plain).abs().amax() > 1e-4


def smooth_tail_heads(n, heads, d=32, seed=0):
    """[1, H, n, d] q = k and v whose attention falls off smoothly with |i - j|:
    random-Fourier features of the position (issue 35's planted heads), a width of
    n / 8 to n / 4 per head, values smooth in the position."""
    rng = np.random.default_rng(seed)
    position = np.arange(n)[:, None]
    qk, values = [], []
    for h in range(heads):
        width = n / rng.uniform(4, 8)
        omega = rng.standard_normal(d) / width
        phase = rng.uniform(0, 2 * np.pi, d)
        features = np.sqrt(2.0 / d) * np.cos(position * omega + phase)
        qk.append(np.sqrt(8.0 * np.sqrt(d)) * features)  # scores 8 * kernel(i - j)
        v_omega = rng.standard_normal(d) / width
        values.append(np.cos(position * v_omega + rng.uniform(0, 2 * np.pi, d)))
    qk = np.stack(qk)[None].astype(np.float32)
    return qk, qk.copy(), np.stack(values)[None].astype(np.float32)


@pytest.mark.parametrize("density", [0.25, 0.10])
def test_smooth_tails_error_drops_at_least_twofold(density):
    n, heads, block = 1024, 6, 64
    q, k, v = _tensors(*smooth_tail_heads(n, heads))
    dense = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    # A tile-granular band of the density (its half width in keys, rounded out).
    half = int(density * n / 2)
    mask = Mask.local(half, half).tile_granular(n, n, block, block)
    errors = {}
    for flag in (False, True):
        out = tilesplash.attention(q, k, v, mask=mask, layout="bhnd", block_q=block,
                                   block_kv=block, backend="flex", compensate=flag)
        errors[flag] = ((out - dense).flatten(2).norm(dim=2)
                        / dense.flatten(2).norm(dim=2))[0].double().numpy()
    counted = errors[False] > 0.01
    assert counted.sum() >= heads // 2, errors[False]
    gain = np.exp(np.mean(np.log(errors[False][counted] / errors[True][counted])))
    assert gain >= 2.0, (errors[False], errors[True])
    assert (errors[True] <= errors[False] * (1 + 1e-6)).all(), (errors[False], errors[True])


def test_compensation_is_accepted_on_flex_and_still_checked():
    with pytest.raises(TypeError, match="compensate"):
        VideoAttention(VideoGeometry(2, 4, 8), backend="flex", compensate="yes")
    VideoAttention(VideoGeometry(2, 4, 8), backend="flex", compensate=True)


def test_fullgraph_compile_around_compensated_flex_equals_eager():
    """Under torch.compile the call is the opaque op, compensate travelling with it."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 200, 16) for _ in range(3))

    def f(q, k, v):
        return tilesplash.attention(q, k, v, mask="local:left=20,right=20", layout="bhnd",
                                    backend="flex", block_q=32, block_kv=64, compensate=True,
                                    return_lse=True)

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)(q, k, v)
    eager = f(q, k, v)
    assert torch.equal(compiled[0], eager[0]) and torch.equal(compiled[1], eager[1])
    plain = tilesplash.attention(q, k, v, mask="local:left=20,right=20", layout="bhnd",
                                 backend="flex", block_q=32, block_kv=64)
    assert not torch.equal(compiled[0], plain)


@pytest.mark.parametrize("density", [0.25, 0.10])
def test_routed_video_attention_on_smooth_tails(density):
    """VideoAttention on flex, the svg pair routed at tile granularity: with compensation
    (the router scoring the compensated outputs) every head is nearer dense, >= 2x in
    geometric mean over the heads whose drop-only error exceeds 0.01."""
    g = VideoGeometry(8, 8, 16)
    q, k, v = _tensors(*smooth_tail_heads(g.tokens, 6, seed=1))
    dense = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    errors = {}
    for flag in (False, True):
        layer = VideoAttention(g, density=density, backend="flex", block_q=64, block_kv=64,
                               granularity="tile", compensate=flag)
        out, report = layer(q, k, v, layout="bhnd")
        errors[flag] = ((out - dense).flatten(2).norm(dim=2)
                        / dense.flatten(2).norm(dim=2))[0].double().numpy()
        assert all(h["compensated"] == flag for h in report["heads"])
    counted = errors[False] > 0.01
    assert counted.any(), errors[False]
    gain = np.exp(np.mean(np.log(errors[False][counted] / errors[True][counted])))
    assert gain >= 2.0, (errors[False], errors[True])
    assert (errors[True] <= errors[False]).all(), (errors[False], errors[True])


def test_bf16_video_attention_agrees_with_native():
    """bf16 on both backends at tile granularity: the same choices, outputs a bf16
    rounding apart (flex merges FlexAttention's already rounded rows)."""
    g = VideoGeometry(5, 6, 8, text=11, text_at="after")
    rng = np.random.default_rng(6)
    q, k, v = _tensors(*(rng.standard_normal((1, 2, g.tokens, 16)) for _ in range(3)),
                       dtype=torch.bfloat16)
    results = [VideoAttention(g, density=0.3, sink=True, backend=backend, block_q=64,
                              block_kv=64, granularity="tile", compensate=True)(
                                  q, k, v, layout="bhnd") for backend in ("cpu", "flex")]
    (o1, r1), (o2, r2) = results
    assert o2.dtype == torch.bfloat16
    assert [h["choice"] for h in r2["heads"]] == [h["choice"] for h in r1["heads"]]
    np.testing.assert_allclose(o2.float().numpy(), o1.float().numpy(), atol=1e-2, rtol=0)


def test_diffusers_drop_in_compensates_on_flex():
    """enable(..., backend="flex", compensate=True) on a tiny Wan: its sparse heads say
    "compensated" and the output moves from the drop-only one."""
    pytest.importorskip("diffusers")
    import tilesplash.diffusers as tsd
    from diffusers_tiny import run_wan, tiny_wan, wan_inputs

    hidden, text = wan_inputs()
    outputs, records = {}, {}
    for flag in (False, True):
        model = tiny_wan()
        handle = tsd.enable(model, density=0.25, backend="flex", dense_layers=1,
                            compensate=flag)
        try:
            outputs[flag] = run_wan(model, hidden, text)
            records[flag] = handle.report()
        finally:
            handle.remove()
    heads = [h for r in records[True] for h in r["heads"] if h["choice"] != "dense"]
    assert heads and any(h["compensated"] for h in heads)
    assert not any(h["compensated"] for r in records[False] for h in r["heads"])
    assert torch.isfinite(outputs[True]).all()
    assert not torch.equal(outputs[True], outputs[False])


def test_chunks_do_not_change_the_bits(monkeypatch):
    """The pass works in chunks of heads (pooling) and rows (scores) to bound memory;
    the chunk size changes no bit."""
    import tilesplash._torch_video.compensation as compensation

    rng = np.random.default_rng(7)
    q, k, v = _tensors(*(rng.standard_normal((1, 5, 300, 8)) for _ in range(3)))
    keep = torch.from_numpy(rng.random((5, 300)) < 0.7)
    out, lse = torch.randn(1, 5, 300, 8), torch.randn(1, 5, 300)
    visited = torch.from_numpy(rng.random((1, 5, 10, 5)) < 0.4)

    def run():
        pooled = pooled_tiles(k, v, 64, keep)
        return pooled, compensate(q, out, lse, pooled, visited, 0.3, 32)

    whole = run()
    monkeypatch.setattr(compensation, "_CHUNK_ELEMENTS", 700)
    chunked = run()
    for a, b in zip([*whole[0], *whole[1]], [*chunked[0], *chunked[1]]):
        assert torch.equal(a, b)
