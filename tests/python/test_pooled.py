"""The pooled-score method (docs/masks.md, "Pooled scores") from Python: a
registered method whose heads run their own kept key tiles, stepped over p by
an error target, and refused by name on the flex backend."""

from __future__ import annotations

import numpy as np
import pytest

import tilesplash
from tilesplash import VideoAttention, VideoGeometry
from conftest import check_against_reference, mask_matrix, random_qkv

GEOMETRY = VideoGeometry(6, 8, 8, text=12, text_at="after")


def test_pooled_is_a_registered_data_driven_method():
    info = tilesplash.methods()["pooled"]
    assert info["data_driven"] and not info["candidates"] and info["choice"] == "pooled"
    assert VideoAttention(GEOMETRY, method="pooled").candidates == []


def test_heads_run_whole_tiles_at_the_density():
    n = GEOMETRY.tokens
    q, k, v = random_qkv(np.random.default_rng(5), 1, 3, n, n, 16, 16)
    layer = VideoAttention(GEOMETRY, method="pooled", density=0.3, sink=True)
    out, lse, report = layer(q, k, v, layout="bhnd", return_lse=True)
    for head in report["heads"]:
        assert head["choice"] == "pooled" and not head["routed"]
        keep = mask_matrix(layer.head_mask(head["head"]), n, n)
        assert head["density"] == pytest.approx(keep.mean())
        assert keep.mean() >= 0.3
        assert keep[:, :GEOMETRY.height * GEOMETRY.width].all()  # the sink
        assert keep[:, n - 12:].all() and keep[n - 12:].all()  # text kept whole
        h = head["head"]
        check_against_reference(out[:, h:h + 1], lse[:, h:h + 1], q[:, h:h + 1], k[:, h:h + 1],
                                v[:, h:h + 1], keep, "f32")


def test_an_error_target_steps_over_p():
    n = GEOMETRY.tokens
    q, k, v = random_qkv(np.random.default_rng(6), 1, 2, n, n, 16, 16)
    densities = {}
    for error in (10.0, 1e-12):
        layer = VideoAttention(GEOMETRY, method="pooled", error=error, samples=16)
        _, report = layer(q, k, v, layout="bhnd")
        for head in report["heads"]:
            assert head["choice"] == "pooled"
            assert head["error"] is not None and np.isfinite(head["error"])
            if head["target_met"]:
                assert head["error"] <= error
        densities[error] = [head["density"] for head in report["heads"]]
    assert all(a <= b for a, b in zip(densities[10.0], densities[1e-12]))


def test_the_flex_backend_refuses_it_by_name():
    torch = pytest.importorskip("torch")
    n = GEOMETRY.tokens
    q = torch.randn(1, 2, n, 16)
    layer = VideoAttention(GEOMETRY, method="pooled", backend="flex")
    with pytest.raises(NotImplementedError, match="pooled.*flex"):
        layer(q, q, q, layout="bhnd")
