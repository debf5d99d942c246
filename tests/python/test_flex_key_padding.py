"""VideoAttention(..., backend="flex", key_lengths=): key padding on the flex backend.

Each batch entry's keys past its length must drop out of every head's mask (dense
included), of the router's dense reference and candidates, of the sink segment
and of svg2's cluster plan, exactly as on the native backend: the same choices
and MSEs, outputs and LSEs within float32 rounding of the native ones and of the
float64 reference of mask & Mask.key_range(0, length); and the BlockMasks must
leave the padded keys' tiles out (a compiled kernel visits only listed tiles,
while eager FlexAttention, which these CPU tests run, calls mask_mod everywhere).
"""

from __future__ import annotations

import numpy as np
import pytest

from tilesplash._backends import BACKENDS

torch = pytest.importorskip("torch")

from tilesplash import Mask, VideoAttention, VideoGeometry  # noqa: E402

from conftest import check_against_reference, mask_matrix  # noqa: E402
from test_flex import check_block_lists, evaluate_mask_mod  # noqa: E402

G = VideoGeometry(3, 4, 5, text=11, text_at="after")  # 60 video + 11 text = 71 tokens
N, VIDEO = G.tokens, G.video_tokens
LENGTHS = [VIDEO, VIDEO + 6, N - 1]  # padding at a tile edge, inside a tile, one key
# kv tiles [0, 64) and [64, 71): 60 leaves the second wholly padded and cuts the first,
# 66 and 70 cut the second (a partial tile made by the padding alone).
BQ, BK = 16, 64


def _inputs(seed, batch=len(LENGTHS), heads=2, d=16, garbage=True):
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(batch, heads, N, d, generator=gen) for _ in range(3))
    if garbage:  # padded keys that would dominate every row if attended
        for b, length in enumerate(LENGTHS[:batch]):
            k[b, :, length:] = 3.0 * q[b].mean(1, keepdim=True)
            v[b, :, length:] = 50.0
    return q, k, v


def _pair(geometry=G, **options):
    return (VideoAttention(geometry, **options),
            VideoAttention(geometry, backend="flex", block_q=BQ, block_kv=BK, **options))


def _same(native, flex):
    (o1, l1, r1), (o2, l2, r2) = native, flex
    assert [h["choice"] for h in r2["heads"]] == [h["choice"] for h in r1["heads"]]
    np.testing.assert_allclose(o2.numpy(), o1.numpy(), rtol=0,
                               atol=2e-6 * max(1.0, float(o1.abs().max())))
    np.testing.assert_allclose(l2.numpy(), l1.numpy(), rtol=2e-6, atol=2e-5)
    for h1, h2 in zip(r1["heads"], r2["heads"]):
        assert h2["density"] == pytest.approx(h1["density"])
        for name, value in h1["mse"].items():
            assert h2["mse"][name] == pytest.approx(value, rel=1e-3, abs=1e-9)


@pytest.mark.parametrize("method,force", [("svg", "dense"), ("svg", "temporal"), ("svg", None),
                                          ("radial", None), ("sta", None), ("mix", None)])
def test_each_entry_equals_native_and_the_reference_of_its_real_keys(method, force):
    q, k, v = _inputs(len(method) + (force is None))
    options = dict(method=method, density=0.3, sink=method in ("svg", "radial", "mix"),
                   samples=12, force=force)
    native, flex = _pair(**options)
    results = [layer(q, k, v, layout="bhnd", return_lse=True, key_lengths=LENGTHS, layer=1,
                     step=2) for layer in (native, flex)]
    _same(*results)
    out, lse, report = results[1]
    for head in report["heads"]:
        b, h = head["batch"], head["head"]
        keep = mask_matrix(flex.mask(head["choice"]), N, N) & (np.arange(N) < LENGTHS[b])[None]
        check_against_reference(out[b:b + 1, h:h + 1].numpy(), lse[b:b + 1, h:h + 1].numpy(),
                                q[b:b + 1, h:h + 1].numpy(), k[b:b + 1, h:h + 1].numpy(),
                                v[b:b + 1, h:h + 1].numpy(), keep, "f32")


def _planted_with_text(kinds, seed=0, d=32, sharpness=12.0):
    """test_video.planted's heads (Q = K, sharp on the frame or the patch) over the
    video tokens of a geometry with text after it; random text rows."""
    g = VideoGeometry(8, 4, 4, text=8, text_at="after")
    rng = np.random.default_rng(seed)
    video, p = g.video_tokens, g.tokens_per_frame
    heads = []
    for kind in kinds:
        groups = g.frames if kind == "spatial" else p
        features = rng.standard_normal((groups, d))
        features /= np.linalg.norm(features, axis=1, keepdims=True)
        index = np.arange(video) // p if kind == "spatial" else np.arange(video) % p
        a = np.sqrt(sharpness * np.sqrt(d))
        x = a * (features[index] + 0.2 * rng.standard_normal((video, d)) / np.sqrt(d))
        heads.append(np.concatenate([x, rng.standard_normal((g.text_tokens, d))]))
    qk = torch.from_numpy(np.stack(heads)[None].astype(np.float32))
    v = torch.from_numpy(rng.standard_normal(qk.shape).astype(np.float32))
    return g, qk, qk.clone(), v


def test_router_drops_padded_keys_like_the_native_router():
    kinds = ["spatial", "temporal", "temporal", "spatial"]
    g, q, k, v = _planted_with_text(kinds)
    length = g.video_tokens + 3
    # Padded keys equal to some video queries, with large values: attended, they would
    # pull those queries' rows of the router's reference and candidates.
    k[:, :, length:] = q[:, :, torch.arange(g.tokens - length) * 16 + 5]
    v[:, :, length:] = 30.0
    native, flex = _pair(g, density=0.3, sink=True)
    results = [layer(q, k, v, layout="bhnd", return_lse=True, key_lengths=[length], layer=1,
                     step=3) for layer in (native, flex)]
    _same(*results)
    assert [h["choice"] for h in results[1][2]["heads"]] == kinds
    # The test can fail: without the padding the MSEs are others.
    _, _, unpadded = flex(q, k, v, layout="bhnd", return_lse=True, layer=1, step=3)
    moved = [abs(a["mse"]["spatial"] - b["mse"]["spatial"]) / b["mse"]["spatial"]
             for a, b in zip(unpadded["heads"], results[1][2]["heads"])]
    assert max(moved) > 1.0


def test_padded_keys_change_nothing_and_batches_equal_single_entries():
    lengths = LENGTHS[:2]
    q, k, v = _inputs(5, batch=2, garbage=False)
    layer = VideoAttention(G, density=0.3, sink=True, backend="flex", block_q=BQ, block_kv=BK,
                           force="temporal")  # the sink segment and the run-order plan
    batched, _ = layer(q, k, v, layout="bhnd", key_lengths=lengths, layer=1, step=1)
    for b, length in enumerate(lengths):
        alone, _ = layer(q[b:b + 1], k[b:b + 1], v[b:b + 1], layout="bhnd", key_lengths=[length],
                         layer=1, step=1)
        assert torch.equal(alone[0], batched[b])
        k2, v2 = k[b:b + 1].clone(), v[b:b + 1].clone()
        k2[:, :, length:] = 1e3
        v2[:, :, length:] = -7e2
        changed, _ = layer(q[b:b + 1], k2, v2, layout="bhnd", key_lengths=[length], layer=1,
                           step=1)
        assert torch.equal(changed[0], batched[b])
    # No padding: the bits of a call without key_lengths.
    plain, _ = layer(q, k, v, layout="bhnd", layer=1, step=1)
    assert torch.equal(layer(q, k, v, layout="bhnd", key_lengths=[N] * 2, layer=1, step=1)[0],
                       plain)


@pytest.mark.parametrize("choices", [["dense", "spatial"], ["temporal", "spatial"],
                                     ["temporal", "temporal"]])
@pytest.mark.parametrize("length", LENGTHS)
def test_block_masks_leave_the_padded_tiles_out(choices, length):
    # Every BlockMask of the call (the original-order heads', the run-order band's with
    # the sink segment's tiles joined after its keys) against a brute-force
    # classification of its masks & real keys.
    layer = VideoAttention(G, density=0.3, sink=True, backend="flex", block_q=BQ, block_kv=BK)
    runner = layer._runner(BACKENDS["flex"])
    masks = runner.block_masks(choices, "cpu", key_limit=length)
    calls = [runner.group_calls(key, group, choices)  # the same calls, unpadded
             for key, group in runner.group_of_candidates(choices).items()]
    assert len(masks) == len(calls)
    for bm, parts in zip(masks, calls):
        kv_len = N if len(parts) == 1 else -(-N // BK) * BK + parts[1][1]
        kept = evaluate_mask_mod(bm, len(choices), N, kv_len)
        for h in range(len(choices)):
            keep = np.zeros((N, kv_len), dtype=bool)
            for (unpadded, keys), start in zip(parts, (0, -(-N // BK) * BK)):
                if unpadded[h] is None:
                    continue
                if keys == N:
                    real = np.arange(N) < length
                else:  # the sink segment: key j is run-order key first + j * stride
                    extra = runner.runs["temporal"]["extra"]
                    real = extra["first"] + extra["stride"] * np.arange(keys) < length
                keep[:, start:start + keys] = unpadded[h].rows(np.arange(N), keys, N) & real[None]
            assert np.array_equal(kept[h], keep)
            check_block_lists(bm, h, keep, BQ, BK)  # wholly padded tiles: not listed


def test_svg2_equals_native_and_its_plan_drops_the_padding():
    from tilesplash._flex import cluster_masks as module

    g = VideoGeometry(3, 5, 6, text=9, text_at="after")
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(2, 2, g.tokens, 32, generator=gen) for _ in range(3))
    lengths = [g.video_tokens + 2, g.tokens - 5]
    native, flex = _pair(g, method="svg2", density=0.25)
    captured = []
    real = module.BlockMask.from_kv_blocks

    def record(*a, **kw):
        captured.append(real(*a, **kw))
        return captured[-1]

    module.BlockMask.from_kv_blocks = record
    try:
        results = [layer(q, k, v, layout="bhnd", return_lse=True, key_lengths=lengths)
                   for layer in (native, flex)]
    finally:
        module.BlockMask.from_kv_blocks = real
    _same(*results)
    n = g.tokens
    for bm, length in zip(captured, lengths):  # one cluster call per batch entry
        kept = evaluate_mask_mod(bm, 2, n, n)
        assert not kept[:, :, length:].any() and kept[:, :, :length].any()
        for h in range(2):
            check_block_lists(bm, h, kept[h], BQ, BK)


def test_key_lengths_errors_on_the_flex_backend():
    q, k, v = _inputs(1, batch=2, garbage=False)
    layer = VideoAttention(G, backend="flex")
    with pytest.raises(ValueError, match="one per batch entry"):
        layer(q, k, v, layout="bhnd", key_lengths=[VIDEO])
    with pytest.raises(ValueError, match=r"key_lengths\[0\]: expected an int in \[60, 71\]"):
        layer(q, k, v, layout="bhnd", key_lengths=[VIDEO - 1, N])
    before = VideoGeometry(3, 4, 5, text=11, text_at="before")
    with pytest.raises(ValueError, match="only text after the video"):
        VideoAttention(before, backend="flex")(q, k, v, layout="bhnd", key_lengths=[N - 2, N])
