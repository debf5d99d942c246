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
    with pytest.raises(ValueError, match="backend: expected 'auto', 'cpu' or 'flex'"):
        tsd.enable(model, backend="cuda")


def _kandinsky_nabla_inputs(batch, seed):
    # NABLA's 8 x 8 tile order (16 x 8 tokens a frame: 2 x 1 tiles), which tilesplash
    # permutes to frame-major order before routing.
    from diffusers_models import kandinsky_inputs

    inputs = kandinsky_inputs(batch, seed, height=32, width=16)
    blocks = 3 * 16 * 8 // 64
    return dict(inputs, sparse_params={
        "to_fractal": True, "sta_mask": torch.ones(1, 1, blocks, blocks, dtype=torch.bool),
        "P": 0.9, "attention_type": "nabla"})


def _family_inputs(name):
    """(inputs for tilesplash, the same call as the model runs it natively)."""
    from diffusers_models import BY_NAME, hunyuan_inputs, kandinsky_inputs

    if name == "HunyuanVideoTransformer3DModel":  # prompts of 4 and 10 tokens in 10 slots
        inputs = hunyuan_inputs(2, 3, lengths=[4, 10])
    elif name == "Kandinsky5Transformer3DModel":
        # NABLA's own attention needs a BlockMask-aware backend: the native reference is
        # the model's dense attention on the plain (frame-major) call.
        return _kandinsky_nabla_inputs(1, 6), kandinsky_inputs(1, 6, height=32, width=16)
    else:
        inputs = BY_NAME[name].inputs(1, 1)
    return inputs, inputs


@pytest.mark.filterwarnings("ignore:In CPU autocast")
@pytest.mark.parametrize("name", ["WanTransformer3DModel", "HunyuanVideoTransformer3DModel",
                                  "CogVideoXTransformer3DModel", "LTXVideoTransformer3DModel",
                                  "Kandinsky5Transformer3DModel"])
def test_flex_equals_native_on_each_model_family(name):
    # Wan (sink), HunyuanVideo (text after, padded prompts: key padding per entry),
    # CogVideoX (text before, its processor copy), LTX (packed tokens, no text) and
    # Kandinsky 5 (NABLA's tile order permuted to frame-major): routed sparse, the flex
    # backend makes the native backend's choices and output; dense equals the model.
    from diffusers_models import BY_NAME, relative_error, run

    model = BY_NAME[name].build()
    inputs, plain = _family_inputs(name)
    native_model = run(model, plain)
    outputs, reports = {}, {}
    for backend in ("cpu", "flex"):
        handle = tsd.enable(model, density=0.3, dense_layers=0, samples=8, backend=backend)
        try:
            outputs[backend] = run(model, inputs)
            reports[backend] = handle.report()
        finally:
            handle.remove()
    for native, flex in zip(reports["cpu"], reports["flex"], strict=True):
        assert [h["choice"] for h in flex["heads"]] == [h["choice"] for h in native["heads"]]
        assert flex["geometry"] == native["geometry"] and flex["backend"] == "flex"
    assert relative_error(outputs["flex"], outputs["cpu"]) < 1e-5
    assert relative_error(outputs["flex"], native_model) > 1e-4  # sparse, not dense
    handle = tsd.enable(model, force="dense", backend="flex")
    try:
        assert relative_error(run(model, inputs), native_model) < 1e-5
    finally:
        handle.remove()
    assert torch.equal(run(model, plain), native_model)
