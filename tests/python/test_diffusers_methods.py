"""tilesplash.diffusers.enable(..., method=...) on the tiny Wan model: every
method runs each sparse head with a mask of that method, equals the native
model where its mask keeps everything (density 1) and differs from it where it
does not; svg2 forgets its clusters when a new denoising run starts; the
summary counts the new choices; bad methods are refused up front."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
tsd = pytest.importorskip("tilesplash.diffusers")

import tilesplash  # noqa: E402
from diffusers_tiny import HEADS, LAYERS, relative_error, run_wan, tiny_wan, wan_inputs  # noqa: E402

DENSE_TOLERANCE = 1e-5  # as test_diffusers.py
METHODS = list(tilesplash.methods())  # the registry: a new method is tested once registered
# Inputs of 12 x 32 x 32 latents: 12 x 16 x 16 tokens after patching, 2 x 2 x 2
# of sta's 6 x 8 x 8 tiles (the default 6 x 8 x 8 tokens are a single tile).
LARGE = {"frames": 12, "height": 32, "width": 32}
GEOMETRY = tilesplash.VideoGeometry(12, 16, 16)


@pytest.fixture(scope="module")
def model():
    return tiny_wan()


@pytest.fixture(scope="module")
def inputs():
    return wan_inputs()


@pytest.fixture(scope="module")
def native(model, inputs):
    return run_wan(model, *inputs)


@pytest.fixture(scope="module")
def large(model):
    inputs = wan_inputs(**LARGE)
    return inputs, run_wan(model, *inputs)


@pytest.fixture
def enabled(model):
    handles = []

    def make(**options):
        handle = tsd.enable(model, **options)
        handles.append(handle)
        return handle

    yield make
    for handle in handles:
        handle.remove()


def choices(handle):
    return {head["choice"] for record in handle.report() for head in record["heads"]}


@pytest.mark.parametrize("method", METHODS)
def test_each_method_runs_its_own_masks(model, large, enabled, method):
    inputs, native = large
    budget = 0.4 if method in ("sta", "mix") else None
    handle = enabled(method=method, density=0.3, density_budget=budget, dense_layers=1, sink=False)
    out = run_wan(model, *inputs)
    assert torch.isfinite(out).all()
    # Attention of a random-weight model is diffuse, so a 30% mask moves the
    # output by only 0.4-0.9% here: still 100x what dense through tilesplash does.
    assert relative_error(out, native) > 100 * DENSE_TOLERANCE
    report = handle.report()
    assert len(report) == LAYERS and all(record["method"] == method for record in report)
    layer = tilesplash.VideoAttention(GEOMETRY, method=method, density=0.3)
    info = tilesplash.methods()[method]
    expected = ({info["choice"]} if info["data_driven"]
                else {name for name, _ in layer.candidates})
    sparse = {head["choice"] for record in report[1:] for head in record["heads"]}
    assert sparse <= expected and len(report[0]["heads"]) == HEADS
    assert {head["choice"] for head in report[0]["heads"]} == {"dense"}
    for record in report[1:]:
        for head in record["heads"]:
            # radial's floor on this small canvas is 62%; the rest meet 30% closely.
            assert head["density"] < (0.65 if head["choice"] == "radial" else 0.4)
            if head["routed"]:
                assert set(head["mse"]) == expected


# Radial cannot keep everything (its frames thin out with distance whatever the
# decay); sta on the default inputs is one tile, so every window keeps it all.
@pytest.mark.parametrize("method", ["sta", "svg2", "mix"])
def test_a_mask_that_keeps_everything_equals_native(model, inputs, native, enabled, method):
    handle = enabled(method=method, density=1.0, dense_layers=0, sink=False)
    out = run_wan(model, *inputs)
    heads = [head for record in handle.report() for head in record["heads"]]
    assert heads and all(head["choice"] != "dense" for head in heads)
    assert all(head["density"] == pytest.approx(1.0) for head in heads)
    assert relative_error(out, native) <= DENSE_TOLERANCE


def test_force_within_a_method(model, inputs, native, enabled):
    handle = enabled(method="mix", force="radial", dense_layers=0)
    run_wan(model, *inputs)
    assert choices(handle) == {"radial"}
    handle.remove()
    handle = enabled(method="sta", force="dense")
    assert relative_error(run_wan(model, *inputs), native) <= DENSE_TOLERANCE
    assert choices(handle) == {"dense"}


def test_a_bad_force_name_fails_at_enable_naming_the_method_masks(model, enabled):
    # radial's mask names do not depend on the geometry (tilesplash.methods()).
    with pytest.raises(ValueError, match="force.*radial"):
        enabled(method="radial", force="spatial", dense_layers=0)


def test_a_bad_sta_window_fails_at_the_first_call_naming_the_candidates(model, inputs, enabled):
    # sta's windows do: the first call, which reveals the geometry, checks them.
    enabled(method="sta", force="sta:99x1x1", dense_layers=0)
    with pytest.raises(ValueError, match="force.*sta:"):
        run_wan(model, *inputs)


def test_svg2_restarts_its_clusters_with_a_new_run(model, inputs, enabled):
    hidden, text = inputs
    handle = enabled(method="svg2", density=0.3, dense_layers=0)
    first = run_wan(model, hidden, text, 999.0)
    later = run_wan(model, hidden, text, 900.0)  # warm-started from step 0
    again = run_wan(model, hidden, text, 999.0)  # a new run: clustered from scratch
    assert [record["step"] for record in handle.report() if record["layer"] == 0] == [0, 1, 0]
    assert torch.equal(first, again)
    assert not torch.equal(first, later)


def test_summary_counts_every_choice(model, inputs, enabled):
    handle = enabled(method="radial", dense_layers=1)
    run_wan(model, *inputs)
    rows = tsd.summarize(handle.report())
    assert rows[0]["dense"] == HEADS and rows[0]["radial"] == (LAYERS - 1) * HEADS
    assert rows[0]["spatial"] == rows[0]["temporal"] == 0
    table = tsd.summary_table(handle.report()).splitlines()
    assert table[0].split() == ["step", "calls", "dense", "spatial", "temporal", "radial",
                                "density", "attention_ms", "saved_ms"]
    assert table[1].split()[:6] == ["0", str(LAYERS), str(HEADS), "0", "0", str((LAYERS - 1) * HEADS)]


@pytest.mark.parametrize(
    "options, error, match",
    [
        ({"method": "radial2"}, ValueError, "method"),
        ({"method": None}, TypeError, "method"),
        ({"method": "mix", "density_budget": 0.0}, ValueError, "density_budget"),
        ({"method": "mix", "density_budget": "1"}, TypeError, "density_budget"),
        ({"method": "svg", "force": "radial"}, ValueError, "force"),
        ({"method": "radial", "force": 3}, TypeError, "force"),
    ],
)
def test_bad_methods(model, options, error, match):
    with pytest.raises(error, match=match):
        tsd.enable(model, **options)
    assert all(type(block.attn1.processor).__name__ == "WanAttnProcessor" for block in model.blocks)


@pytest.mark.parametrize("order, ran", [("frame", "original"), ("token", "token-major")])
def test_pooled_heads_cut_their_tiles_in_the_order_asked(model, large, enabled, order, ran):
    inputs, _ = large
    handle = enabled(method="pooled", density=0.3, dense_layers=1, sink=False, order=order)
    assert torch.isfinite(run_wan(model, *inputs)).all()
    orders = {head["order"] for record in handle.report()[1:] for head in record["heads"]}
    assert orders == {ran}
    with pytest.raises(ValueError, match=r"enable: order: expected one of auto, frame, token"):
        tsd.enable(model, method="pooled", order="rows")
