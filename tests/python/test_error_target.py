"""The error target (VideoAttention(error=...)) and the routing policy's single source.

The routing rule and the warm-up decision live in the library (routing.h);
the native, flex and JAX front doors must all follow it: inverting it with
the library's test-only switch inverts every front door's choices. The
error target picks, per head, the least dense candidate of the ladder whose
sampled relative L2 error meets it, and refuses bad values by name.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import tilesplash
from tilesplash import VideoAttention, VideoGeometry, _core

from test_video import planted

KINDS = ["spatial", "temporal", "temporal", "spatial", "temporal"]
GEOMETRY = VideoGeometry(8, 4, 4)


@pytest.fixture
def inverted():
    _core._set_policy_inverted_for_tests(True)
    yield
    _core._set_policy_inverted_for_tests(False)


def _choices(report):
    return [h["choice"] for h in report["heads"]]


def _by_rule(report, candidates, pick):
    """The choices `pick` (min or max) of each head's MSEs gives."""
    names = [name for name, _ in candidates]
    return [names[pick(range(len(names)), key=lambda i: h["mse"][names[i]])]
            for h in report["heads"]]


def test_error_target_takes_the_least_dense_that_meets_it():
    q, k, v = planted(GEOMETRY, KINDS)
    layer = VideoAttention(GEOMETRY, error=0.2)
    names = [name for name, _ in layer.candidates]
    assert names[:2] == ["spatial@0.05", "temporal@0.05"] and len(names) == 10
    _, report = layer(q, k, v, layout="bhnd")
    density = dict(layer.candidates)
    for head in report["heads"]:
        assert head["routed"] and head["error"] is not None
        met = head["target_met"]
        assert met == (head["error"] <= 0.2)
        if met:
            # No less dense candidate meets the target (sampled errors order like MSEs).
            power = head["mse"][head["choice"]] / head["error"] ** 2 if head["error"] else None
            if power:
                for name, mse in head["mse"].items():
                    if density[name] < head["density"]:
                        assert math.sqrt(mse / power) > 0.2 * (1 - 1e-9)
    densities = {h["density"] for h in report["heads"]}
    assert len(densities) > 1  # heads run different densities in one call


def test_error_with_a_method_ladder_and_budget():
    layer = VideoAttention(GEOMETRY, method="radial", error=0.1, densities=[0.2, 0.5],
                           density_budget=0.6)
    assert [name for name, _ in layer.candidates] == ["radial@0.2", "radial@0.5"]
    assert layer.error == 0.1
    q, k, v = planted(GEOMETRY, KINDS)
    _, report = layer(q, k, v, layout="bhnd")
    assert all("target_met" in h for h in report["heads"])


@pytest.mark.parametrize("kwargs,match", [
    (dict(error=0.0), "error: expected"),
    (dict(error=-1.0), "error: expected"),
    (dict(error=float("nan")), "error: expected"),
    (dict(error=0.1, densities=[]), "densities: expected at least one"),
    (dict(error=0.1, densities=[0.2, 0.1]), "densities: expected strictly increasing"),
    (dict(error=0.1, densities=[0.1, 1.5]), r"densities\[1\]"),
    (dict(error=0.1, densities=[0.0, 0.5]), r"densities\[0\]"),
    (dict(densities=[0.1, 0.2]), "densities: a density ladder applies with error"),
    (dict(method="svg2", error=0.1), "no density ladder"),
    (dict(error=0.1, band=8), "band: with error"),
])
def test_bad_targets_and_ladders_are_refused_by_name(kwargs, match):
    with pytest.raises(ValueError, match=match):
        VideoAttention(GEOMETRY, **kwargs)
    with pytest.raises(TypeError, match="error"):
        VideoAttention(GEOMETRY, error="0.1")


def test_native_front_door_follows_the_librarys_rule(inverted):
    q, k, v = planted(GEOMETRY, KINDS)
    layer = VideoAttention(GEOMETRY, dense_layers=1)
    _, report = layer(q, k, v, layout="bhnd", layer=0)  # dense by the rule; inverted: routed
    assert not report["warmup"]
    assert _choices(report) == _by_rule(report, layer.candidates, max)


def test_flex_front_door_follows_the_librarys_rule(inverted):
    torch = pytest.importorskip("torch")
    q, k, v = (torch.from_numpy(x) for x in planted(GEOMETRY, KINDS))
    layer = VideoAttention(GEOMETRY, backend="flex", block_q=64, block_kv=64, dense_layers=1)
    _, report = layer(q, k, v, layout="bhnd", layer=0)
    assert not report["warmup"]
    assert _choices(report) == _by_rule(report, layer.candidates, max)
    _core._set_policy_inverted_for_tests(False)
    _, report = layer(q, k, v, layout="bhnd", layer=1)
    assert _choices(report) == _by_rule(report, layer.candidates, min) == KINDS


def test_flex_error_target_makes_the_native_choices():
    torch = pytest.importorskip("torch")
    q, k, v = (torch.from_numpy(x) for x in planted(GEOMETRY, KINDS))
    native = VideoAttention(GEOMETRY, error=0.15)
    flex = VideoAttention(GEOMETRY, error=0.15, backend="flex", block_q=64, block_kv=64)
    o1, r1 = native(q, k, v, layout="bhnd")
    o2, r2 = flex(q, k, v, layout="bhnd")
    assert _choices(r1) == _choices(r2)
    assert [h["target_met"] for h in r1["heads"]] == [h["target_met"] for h in r2["heads"]]
    for h1, h2 in zip(r1["heads"], r2["heads"]):
        assert h2["error"] == pytest.approx(h1["error"], rel=1e-3)
    np.testing.assert_allclose(o2.numpy(), o1.numpy(), atol=2e-5)


def test_jax_front_door_follows_the_librarys_rule(inverted):
    pytest.importorskip("jax")
    import jax.numpy as jnp

    import tilesplash.jax as tsj

    q, k, v = (jnp.asarray(x[0]) for x in planted(GEOMETRY, KINDS))
    routing = tsj.route(q, k, v, GEOMETRY)
    mse = np.asarray(routing.mse)
    names = [name for name, _ in VideoAttention(GEOMETRY).candidates]
    assert list(routing.choices) == [names[int(np.argmax(row))] for row in mse]
    _core._set_policy_inverted_for_tests(False)
    routing = tsj.route(q, k, v, GEOMETRY)
    assert list(routing.choices) == KINDS


def test_jax_error_target_makes_the_native_choices():
    pytest.importorskip("jax")
    import jax.numpy as jnp

    import tilesplash.jax as tsj

    q, k, v = planted(GEOMETRY, KINDS)
    _, report = VideoAttention(GEOMETRY, error=0.15)(q, k, v, layout="bhnd")
    routing = tsj.route(*(jnp.asarray(x[0]) for x in (q, k, v)), GEOMETRY, error=0.15)
    assert list(routing.choices) == _choices(report)
    assert list(np.asarray(routing.target_met)) == [h["target_met"] for h in report["heads"]]


def test_core_decision_is_the_documented_rule():
    mse = np.array([[0.01, 0.04, 0.16, 0.64]])
    index, met, errors = _core.decide_routes(mse, np.array([4.0]), [0.4, 0.25, 0.1, 0.05],
                                             None, 0.2)
    assert list(index) == [2] and list(met) == [True]
    np.testing.assert_allclose(errors[0], [0.05, 0.1, 0.2, 0.4])
    assert _core.warmup_is_dense(1, 0, 0, 3) and not _core.warmup_is_dense(1, 0, 1, 3)
    assert _core.default_density_ladder() == [0.05, 0.10, 0.15, 0.25, 0.40]


def test_jax_splash_runner_routes_by_the_error_target_under_jit():
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import tilesplash.jax as tsj

    q, k, v = (jnp.asarray(x[0]) for x in planted(GEOMETRY, KINDS))
    layer = tsj.VideoSplashAttention(GEOMETRY, error=0.15, densities=[0.1, 0.3], block_q=16,
                                     block_kv=128, interpret=True)
    expected = tsj.route(q, k, v, GEOMETRY, error=0.15, densities=[0.1, 0.3])
    out, index, _ = jax.jit(layer.attend)(q, k, v, layer.samples(0, 0))
    assert out.shape == q.shape
    assert [layer.router.names[i] for i in np.asarray(index)] == list(expected.choices)


@pytest.mark.parametrize("method", ["svg", "sta"])
def test_heads_report_family_and_rung_as_fields(method):
    """What a head ran, as fields: its registered mask family and its ladder rung
    (no caller parses "family@density")."""
    layer = VideoAttention(GEOMETRY, method=method, error=0.1, densities=[0.2, 0.5])
    q, k, v = planted(GEOMETRY, KINDS)
    _, report = layer(q, k, v, layout="bhnd")
    for head in report["heads"]:
        assert head["family"] in tilesplash.methods() and tilesplash.methods()[head["family"]]["spec"]
        assert head["rung"] in (0.2, 0.5)
        assert head["choice"].startswith(head["family"])
    name, _ = layer.candidates[-1]
    forced = VideoAttention(GEOMETRY, method=method, error=0.1, densities=[0.2, 0.5], force=name)
    _, report = forced(q, k, v, layout="bhnd")
    assert {h["rung"] for h in report["heads"]} == {0.5}
    dense = VideoAttention(GEOMETRY, force="dense")
    _, report = dense(q, k, v, layout="bhnd")
    assert {(h["family"], h["rung"]) for h in report["heads"]} == {("dense", 0.0)}


def test_the_default_method_is_the_registrys():
    from tilesplash._methods import DEFAULT_METHOD, default_method

    assert DEFAULT_METHOD == default_method() == _core.default_method() in tilesplash.methods()
    assert VideoAttention(GEOMETRY).method == _core.default_method()
