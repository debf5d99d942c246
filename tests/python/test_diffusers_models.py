"""tilesplash.diffusers.enable on every video transformer it serves, each tiny from its config.

For every model: force="dense" and density=1.0 equal diffusers' own output
(the case's dense_tolerance, 1e-5 as test_diffusers.py argues: both sides are
exact f32 attention and differ only in summation order), a routed sparse run completes
and reports the geometry of its input, and remove() restores the model bit for
bit. The model-specific cases (padded prompts, token orders, refusals) are in
test_diffusers_quirks.py.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
tsd = pytest.importorskip("tilesplash.diffusers")

# diffusers' Mochi asks for a float32 CPU autocast, which torch declines with a warning.
pytestmark = pytest.mark.filterwarnings("ignore:In CPU autocast")

from diffusers_models import CASES, relative_error, run  # noqa: E402


@pytest.fixture(scope="module", params=CASES, ids=[case.name for case in CASES])
def case(request):
    case = request.param
    model = case.build()
    inputs = case.inputs(1, 1)
    return case, model, inputs, run(model, inputs)


def _modules(model, case):
    spec = tsd._models.spec_for(model)
    return [module for _, _, module in spec.modules(model)]


def test_every_served_model_has_a_case():
    served = {name for name, refusal in tsd.supported_models().items() if refusal is None}
    assert served == {case.name for case in CASES}


def test_no_model_class_name_outside_the_model_table():
    # What differs between models lives in _models.py's table (ModelSpec fields), not in
    # checks of a class name elsewhere.
    import pathlib
    import re

    package = pathlib.Path(tsd.__file__).parents[1]
    names = "|".join(map(re.escape, tsd.supported_models()))
    found = [f"{path.relative_to(package)}:{text[:match.start()].count(chr(10)) + 1}: {match[0]}"
             for path in package.rglob("*.py") if path.name != "_models.py"
             for text in [path.read_text()]
             for match in re.finditer(rf"\b({names})\b", text)]
    assert found == []
    assert len(tsd.supported_models()) >= 28


def test_force_dense_equals_native(case):
    case, model, inputs, native = case
    handle = tsd.enable(model, force="dense")
    try:
        out = run(model, inputs)
        report = handle.report()
    finally:
        handle.remove()
    assert relative_error(out, native) <= case.dense_tolerance
    assert len(report) == case.layers
    assert all(head["choice"] == "dense" for record in report for head in record["heads"])


def test_density_one_equals_native(case):
    case, model, inputs, native = case
    handle = tsd.enable(model, density=1.0, dense_layers=0, samples=8)
    try:
        out = run(model, inputs)
        report = handle.report()
    finally:
        handle.remove()
    assert relative_error(out, native) <= case.dense_tolerance
    heads = [head for record in report for head in record["heads"]]
    assert heads and all(head["choice"] in ("spatial", "temporal") for head in heads)
    assert all(head["density"] == pytest.approx(1.0) for head in heads)


def test_routed_sparse_run_reports_the_input_geometry(case):
    case, model, inputs, native = case
    handle = tsd.enable(model, density=0.3, dense_layers=0, samples=8)
    try:
        out = run(model, inputs)
        report = handle.report()
    finally:
        handle.remove()
    assert torch.isfinite(out).all()
    assert len(report) == case.layers
    frames, height, width = case.video
    for record in report:
        geometry = record["geometry"]
        assert (geometry["frames"], geometry["height"], geometry["width"]) == (frames, height, width)
        assert geometry["text"] == case.text
        assert record["transformer"] == case.name
        assert {head["choice"] for head in record["heads"]} <= {"spatial", "temporal"}
        assert all(head["routed"] and head["density"] < 0.9 for head in record["heads"])


def test_remove_restores_bit_for_bit(case):
    case, model, inputs, native = case
    modules = _modules(model, case)
    originals = [module.processor for module in modules]
    handle = tsd.enable(model, density=0.3, dense_layers=0, samples=8)
    assert all(module.processor is not original for module, original in zip(modules, originals))
    sparse = run(model, inputs)
    handle.remove()
    assert not handle.active
    assert [module.processor for module in modules] == originals
    assert not model._forward_pre_hooks
    assert not any(module._forward_pre_hooks or module._forward_hooks for module in modules)
    assert torch.equal(run(model, inputs), native)
    assert not torch.equal(sparse, native)
