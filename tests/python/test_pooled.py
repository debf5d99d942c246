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


def test_p_floor_and_gate_reach_the_heads():
    layer = VideoAttention(GEOMETRY, method="pooled", p=0.9, floor=3, gate=0.2)
    assert layer.pooled_options == {"p": 0.9, "floor": 3, "gate": 0.2, "order": "auto",
                                    "density": None}
    # Without p the density chooses p; the library's floor and gate stay.
    default = VideoAttention(GEOMETRY, method="pooled", density=0.3).pooled_options
    assert default["density"] == 0.3 and default["floor"] == 1 and default["gate"] == 0.6
    n = GEOMETRY.tokens
    q, k, v = random_qkv(np.random.default_rng(7), 1, 2, n, n, 16, 16)
    out, lse, report = layer(q, k, v, layout="bhnd", return_lse=True)
    tiles = -(-n // 64)
    for head in report["heads"]:
        keep = mask_matrix(layer.head_mask(head["head"]), n, n)
        kept_tiles = keep[::64, ::64].sum(axis=1)
        assert (kept_tiles >= min(3, tiles)).all()  # the floor
        h = head["head"]
        check_against_reference(out[:, h:h + 1], lse[:, h:h + 1], q[:, h:h + 1], k[:, h:h + 1],
                                v[:, h:h + 1], keep, "f32")
    assert VideoAttention(GEOMETRY, method="pooled", p=1.0, gate=-1.0).pooled_options["p"] == 1.0


@pytest.mark.parametrize("order, ran", [("frame", "original"), ("token", "token-major")])
def test_order_fixes_every_heads_row_order(order, ran):
    layer = VideoAttention(GEOMETRY, method="pooled", order=order)
    assert layer.pooled_options["order"] == order
    n = GEOMETRY.tokens
    q, k, v = random_qkv(np.random.default_rng(3), 1, 2, n, n, 16, 16)
    out, lse, report = layer(q, k, v, layout="bhnd", return_lse=True)
    assert [head["order"] for head in report["heads"]] == [ran, ran]
    for head in report["heads"]:  # each head exact under the mask it ran, mapped back
        keep = mask_matrix(layer.head_mask(head["head"]), n, n)
        h = head["head"]
        check_against_reference(out[:, h:h + 1], lse[:, h:h + 1], q[:, h:h + 1], k[:, h:h + 1],
                                v[:, h:h + 1], keep, "f32")


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(order="rows"), ValueError, r"order: expected one of auto, frame, token or None, got 'rows'"),
    (dict(order=1), TypeError, r"order: expected one of auto, frame, token or None, got int"),
    (dict(p=1.5), ValueError, r"p: expected a cumulative mass in \(0, 1\], got 1.5"),
    (dict(p=0.0), ValueError, r"p: expected a cumulative mass in \(0, 1\]"),
    (dict(p="0.9"), TypeError, r"p: expected a cumulative mass"),
    (dict(floor=-1), ValueError, r"floor: expected an int in \[0"),
    (dict(floor=1.5), TypeError, r"floor: expected an int"),
    (dict(gate=1.5), ValueError, r"gate: expected a cosine similarity in \[-1, 1\], got 1.5"),
    (dict(gate=float("nan")), ValueError, r"gate: expected a cosine similarity"),
    (dict(p=0.9, error=0.05), ValueError, r"p: with error the ladder of p"),
    (dict(families=("spatial",)), ValueError, r"families: applies to method 'mix' only"),
])
def test_pooled_options_are_refused_by_name(kwargs, error, match):
    with pytest.raises(error, match=match):
        VideoAttention(GEOMETRY, method="pooled", **kwargs)


@pytest.mark.parametrize("method, kwargs, match", [
    ("radial", dict(p=0.9), r"p: applies to heads that rank their own pooled key tiles"),
    ("mix", dict(gate=0.5), r"gate: applies to heads .*'mix' with it among its families"),
    ("svg", dict(order="token"), r"order: applies to heads that rank their own pooled key tiles"),
    ("svg", dict(families=("spatial", "pooled")), r"families: applies to method 'mix' only"),
    ("mix", dict(families=("svg2",)), r"families\[0\]: expected 'spatial', .* or 'pooled', got"),
    ("mix", dict(families=("spatial", "spatial")), r"families: 'spatial' is named twice"),
    ("mix", dict(families=()), r"families: expected at least one method name"),
    ("mix", dict(families="pooled"), r"families: expected a sequence of method names"),
])
def test_method_options_belong_to_their_methods(method, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        VideoAttention(GEOMETRY, method=method, **kwargs)


def test_the_mix_routes_heads_to_their_own_pooled_selection():
    # Which heads pooled wins on planted heads is tests/pooled_mix_test.cc's; here the
    # Python face: at a target no band meets, every head takes a pooled rung (the
    # first that meets it, here exactly, else its lowest error) and runs what pooled
    # alone runs at that target.
    n = GEOMETRY.tokens
    q, k, v = random_qkv(np.random.default_rng(8), 1, 2, n, n, 16, 16)
    mix = VideoAttention(GEOMETRY, method="mix", families=("spatial", "temporal", "pooled"),
                         error=1e-12, samples=16, threads=1)
    assert mix.pooled_options["density"] == 0.25  # the ladder of p replaces it per head
    assert {name.split("@")[0] for name, _ in mix.candidates} == {"spatial", "temporal"}
    out, report = mix(q, k, v, layout="bhnd")
    alone = VideoAttention(GEOMETRY, method="pooled", error=1e-12, samples=16, threads=1)
    out_alone, report_alone = alone(q, k, v, layout="bhnd")
    for head, head_alone in zip(report["heads"], report_alone["heads"]):
        assert head["routed"] and head["choice"] == "pooled" and head["family"] == "pooled"
        assert head["rung"] in (0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 1.0)
        assert np.isfinite(head["error"]) and head["target_met"] == (head["error"] <= 1e-12)
        assert set(head["mse"]) == {name for name, _ in mix.candidates}
        assert head["density"] == head_alone["density"]
    np.testing.assert_array_equal(out, out_alone)
    # "pooled" is a choice force takes in such a mix.
    forced = VideoAttention(GEOMETRY, method="mix", families=("spatial", "pooled"),
                            force="pooled", density=0.3, threads=1)
    _, report = forced(q, k, v, layout="bhnd")
    assert all(h["choice"] == "pooled" and not h["routed"] for h in report["heads"])


def test_the_flex_backend_refuses_a_mix_with_pooled_by_name():
    torch = pytest.importorskip("torch")
    n = GEOMETRY.tokens
    q = torch.randn(1, 2, n, 16)
    layer = VideoAttention(GEOMETRY, method="mix", families=("spatial", "pooled"), backend="flex")
    with pytest.raises(NotImplementedError, match="'mix' with 'pooled' among its families.*flex"):
        layer(q, q, q, layout="bhnd")
    # Without pooled among them the mix runs on flex as before.
    plain = VideoAttention(GEOMETRY, method="mix", families=("spatial", "temporal"),
                           backend="flex")
    plain(q, q, q, layout="bhnd")


def test_enable_checks_the_pooled_options_at_once():
    pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    from tilesplash.diffusers import enable
    from diffusers_tiny import tiny_wan

    model = tiny_wan()
    with pytest.raises(ValueError, match=r"enable: p: expected a cumulative mass in \(0, 1\]"):
        enable(model, method="pooled", p=2.0)
    with pytest.raises(TypeError, match=r"enable: families: expected a sequence"):
        enable(model, method="mix", families="pooled")
