"""tilesplash.diffusers.enable(..., backend="flex") on the tiny random-weight Wan:
the same per-head choices and (within f32 rounding) the same output as the
native backend, and remove() restores the model bit for bit. On a GPU machine
the same code runs a CUDA transformer (tests/python/test_gpu.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
tsd = pytest.importorskip("tilesplash.diffusers")

from diffusers_tiny import relative_error, run_wan, tiny_wan, wan_inputs  # noqa: E402


@pytest.mark.parametrize("method", ["svg", "svg2"])
def test_flex_backend_equals_the_native_backend(method):
    model = tiny_wan(layers=2)  # dense_layers=1: one routed layer
    hidden, text = wan_inputs()
    native_model = run_wan(model, hidden, text)
    outputs, reports = [], []
    for backend in ("cpu", "flex"):
        handle = tsd.enable(model, method=method, density=0.3, dense_layers=1, backend=backend)
        try:
            outputs.append(run_wan(model, hidden, text))
            outputs.append(run_wan(model, hidden, text, timestep=400.0))  # the next step
            reports.append(handle.report())
        finally:
            handle.remove()
    for native, flex in zip(reports[0], reports[1]):
        assert [h["choice"] for h in flex["heads"]] == [h["choice"] for h in native["heads"]]
        assert (flex["layer"], flex["step"]) == (native["layer"], native["step"])
    assert any(h["choice"] != "dense" for r in reports[1] for h in r["heads"])
    assert relative_error(outputs[2], outputs[0]) < 1e-5
    assert relative_error(outputs[3], outputs[1]) < 1e-5
    assert relative_error(outputs[2], native_model) > 1e-4  # sparse, not dense
    # remove() restores the native processors: the model's output bit for bit
    assert torch.equal(run_wan(model, hidden, text), native_model)


def test_enable_checks_the_backend():
    model = tiny_wan(layers=1)
    with pytest.raises(ValueError, match="backend must be 'auto', 'cpu' or 'flex'"):
        tsd.enable(model, backend="cuda")
