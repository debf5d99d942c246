"""tilesplash.VideoAttention: outputs against the float64 reference under each
head's chosen mask, forced masks, the warm-up policy by layer and step, the
report's contents, planted heads routed right, layouts, dtypes and torch."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import tilesplash
from tilesplash import Mask, VideoAttention, VideoGeometry
from conftest import check_against_reference, from_layout, mask_matrix, random_qkv, to_layout

G = VideoGeometry(4, 3, 5)  # 60 tokens
G_TEXT = VideoGeometry(3, 4, 4, text=9, text_at="before")  # 57 tokens
HEAD_KEYS = {"batch", "head", "choice", "family", "rung", "order", "routed", "mse_spatial", "mse_temporal", "mse", "error",
             "target_met", "density", "tiles_visited", "seconds", "permute_seconds", "cluster_seconds", "plan_seconds",
             "compensated", "compensation_seconds"}
LAYER_KEYS = {"heads", "method", "band", "warmup", "block_q", "block_kv", "blocks_tuned",
              "routing_seconds", "plan_seconds", "cluster_seconds", "permute_seconds",
              "attention_seconds", "total_seconds", "seconds", "granularity"}


def chosen_mask(geometry, choice, band, sink, text_full):
    if choice == "dense":
        return Mask.dense()
    make = Mask.spatial if choice == "spatial" else Mask.temporal
    return make(geometry, band, sink=sink, text_full=text_full)


@pytest.mark.parametrize("geometry,sink,text_full", [(G, False, True), (G, True, True),
                                                     (G_TEXT, True, True), (G_TEXT, False, False)])
@pytest.mark.parametrize("layout", ["bnhd", "bhnd"])
def test_routed_heads_equal_the_reference_of_their_mask(geometry, sink, text_full, layout):
    n = geometry.tokens
    rng = np.random.default_rng(n + sink)
    q, k, v = random_qkv(rng, 2, 4, n, n, 16, 16)
    layer = VideoAttention(geometry, density=0.35, sink=sink, text_full=text_full, samples=16,
                           block_q=16, block_kv=64)
    out, lse, report = layer(to_layout(q, layout), to_layout(k, layout), to_layout(v, layout),
                             layout=layout, return_lse=True)
    assert set(report) == LAYER_KEYS and report["band"] == layer.band
    assert len(report["heads"]) == 8  # one per (batch entry, head)
    out, lse = from_layout(out, layout), lse
    for head in report["heads"]:
        assert set(head) == HEAD_KEYS and head["routed"] and head["choice"] in ("spatial", "temporal")
        assert head["mse_spatial"] >= 0 and head["mse_temporal"] >= 0
        assert head["mse"] == {"spatial": head["mse_spatial"], "temporal": head["mse_temporal"]}
        expected = "temporal" if head["mse_temporal"] < head["mse_spatial"] else "spatial"
        assert head["choice"] == expected
        mask = chosen_mask(geometry, head["choice"], layer.band, sink, text_full)
        assert layer.mask(head["choice"]) == mask
        b, h = head["batch"], head["head"]
        keep = mask_matrix(mask, n, n)
        assert head["density"] == pytest.approx(keep.mean())
        check_against_reference(out[b:b + 1, h:h + 1], lse[b:b + 1, h:h + 1], q[b:b + 1, h:h + 1],
                                k[b:b + 1, h:h + 1], v[b:b + 1, h:h + 1], keep, "f32")


def test_forced_masks_and_dense_equal_plain_attention():
    n = G.tokens
    q, k, v = random_qkv(np.random.default_rng(11), 1, 3, n, n, 16, 16)
    bnhd = [to_layout(x, "bnhd") for x in (q, k, v)]
    dense, report = VideoAttention(G, force="dense", block_q=16, block_kv=64)(*bnhd)
    assert all(h["choice"] == "dense" and not h["routed"] and h["mse_spatial"] is None
               for h in report["heads"])
    assert np.array_equal(dense, tilesplash.attention(*bnhd, layout="bnhd", block_q=16, block_kv=64))
    for force in ("spatial", "temporal"):
        layer = VideoAttention(G, band=9, force=force, sink=True)
        out, report = layer(*bnhd)
        assert {h["choice"] for h in report["heads"]} == {force}
        check_against_reference(from_layout(out, "bnhd"), None, q, k, v,
                                mask_matrix(chosen_mask(G, force, 9, True, True), n, n), "f32")


def test_warmup_by_layer_and_step():
    n = G.tokens
    q, k, v = (to_layout(x, "bnhd") for x in random_qkv(np.random.default_rng(12), 1, 2, n, n, 8, 8))
    layer = VideoAttention(G, dense_layers=2, dense_steps=3, samples=8)
    for layer_index, step, warm in [(0, 5, True), (1, 9, True), (2, 0, True), (2, 2, True),
                                    (2, 3, False), (7, 40, False)]:
        _, report = layer(q, k, v, layer=layer_index, step=step)
        assert report["warmup"] is warm
        assert all((h["choice"] == "dense") == warm and h["routed"] is not warm
                   for h in report["heads"])


def planted(geometry, kinds, d=32, sharpness=12.0, seed=0):
    """Q = K per head, sharp on the frame (spatial) or the patch (temporal)."""
    rng = np.random.default_rng(seed)
    n, p = geometry.tokens, geometry.tokens_per_frame
    heads = []
    for kind in kinds:
        groups = geometry.frames if kind == "spatial" else p
        features = rng.standard_normal((groups, d))
        features /= np.linalg.norm(features, axis=1, keepdims=True)
        index = np.arange(n) // p if kind == "spatial" else np.arange(n) % p
        a = np.sqrt(sharpness * np.sqrt(d))
        x = a * (features[index] + 0.2 * rng.standard_normal((n, d)) / np.sqrt(d))
        heads.append(x)
    qk = np.stack(heads)[None].astype(np.float32)  # [1, H, N, d]
    v = rng.standard_normal(qk.shape).astype(np.float32)
    return qk, qk.copy(), v


def test_planted_heads_are_routed_to_their_mask():
    geometry = VideoGeometry(8, 4, 4)
    kinds = ["spatial", "temporal", "temporal", "spatial"]
    q, k, v = planted(geometry, kinds)
    _, report = VideoAttention(geometry, density=0.25)(q, k, v, layout="bhnd")
    assert [h["choice"] for h in report["heads"]] == kinds


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_low_precision_and_torch(dtype):
    torch = pytest.importorskip("torch")
    n = G.tokens
    q, k, v = random_qkv(np.random.default_rng(13), 1, 2, n, n, 16, 16, dtype)
    layer = VideoAttention(G, force="spatial", band=10)
    out, _ = layer(q, k, v, layout="bhnd")
    assert out.dtype == q.dtype
    check_against_reference(out, None, q, k, v, mask_matrix(Mask.spatial(G, 10, text_full=True), n, n),
                            dtype)
    tq, tk, tv = (torch.from_numpy(x.astype(np.float32)).to(
        torch.bfloat16 if dtype == "bf16" else torch.float16) for x in (q, k, v))
    t_out, report = layer(tq, tk, tv, layout="bhnd")
    assert isinstance(t_out, torch.Tensor) and t_out.dtype == tq.dtype
    assert np.array_equal(t_out.to(torch.float32).numpy(), out.astype(np.float32))


def test_tiles_default_to_the_tuned_choice_unless_told():
    q, k, v = (to_layout(x, "bnhd") for x in random_qkv(np.random.default_rng(14), 1, 1, 60, 60, 8, 8))
    _, report = VideoAttention(G)(q, k, v)
    chosen = (report["block_q"], report["block_kv"])
    if not report["blocks_tuned"]:
        assert chosen == (60, 64)  # the heuristic: block_q = N up to 256, block_kv rounded to 64
    _, told = VideoAttention(G, block_q=32, block_kv=128)(q, k, v)
    assert (told["block_q"], told["block_kv"]) == (32, 128)


def test_calls_from_two_threads_queue_and_both_are_right():
    n = G.tokens
    layer = VideoAttention(G, force="temporal", band=6)
    inputs = [random_qkv(np.random.default_rng(20 + i), 1, 2, n, n, 16, 16) for i in range(2)]
    results = [None, None]

    def run(i):
        results[i] = layer(*inputs[i], layout="bhnd")[0]

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    keep = mask_matrix(Mask.temporal(G, 6, text_full=True), n, n)
    for i in range(2):
        check_against_reference(results[i], None, *inputs[i], keep, "f32")
