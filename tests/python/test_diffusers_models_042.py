"""The quirks of the video transformers new in diffusers 0.42 (their common tests are in
test_diffusers_models.py): Kandinsky 6 SR's NABLA tile order, Helios's history tokens,
Motif-Video's decoder layers, and the five classes refused, each built tiny and each
refusal saying why."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
tsd = pytest.importorskip("tilesplash.diffusers")

from diffusers_models import BY_NAME, relative_error, run  # noqa: E402
from diffusers_models_042 import REFUSED, helios_inputs  # noqa: E402

from tilesplash.diffusers import _dispatch, _models  # noqa: E402


def test_kandinsky6_sr_tile_order_is_undone_as_diffusers_makes_it():
    # The model orders tokens with its own _local_patch (8 x 8 tiles a frame); the rows
    # tilesplash reads must give back frame-major order exactly, or its sparse masks would be
    # other masks (dense attention cannot tell: it is the same under any permutation).
    from diffusers.models.transformers.transformer_kandinsky6_sr import _local_patch

    model = BY_NAME["Kandinsky6SRTransformer3DModel"].build()
    frames, height, width = 2, 16, 24
    inputs = {"hidden_states": torch.zeros(1, frames, height, width, 9), "timestep": torch.zeros(1)}
    order = _forward(model, inputs).order
    grid = torch.arange(frames * height * width).reshape(1, frames, height, width, 1)
    tiled = _local_patch(grid, (frames, height, width), (1, 8, 8), dim=1).reshape(-1)
    rows = _dispatch._frame_major_rows(order, frames, height, width, tiled.numel(), "cpu")
    assert not torch.equal(tiled, torch.arange(tiled.numel()))
    assert torch.equal(tiled[rows], torch.arange(tiled.numel()))


@pytest.mark.parametrize("frames", [(2, 2, 4), (1, 3, 5)], ids=["even", "padded"])
def test_helios_history_tokens_are_counted_as_the_model_counts_them(frames):
    # The block's original_context_length is the video; the rest of its sequence, before the
    # video, is the history tilesplash moves after it.
    short, mid, long = frames
    model = BY_NAME["HeliosTransformer3DModel"].build()
    inputs = helios_inputs(1, 4)
    for name, t, first in (("short", short, 10), ("mid", mid, 20), ("long", long, 30)):
        inputs[f"latents_history_{name}"] = torch.randn(1, 4, t, 8, 8)
        inputs[f"indices_latents_history_{name}"] = torch.arange(first, first + t)[None]
    seen = {}
    hook = model.blocks[0].register_forward_pre_hook(
        lambda module, args: seen.update(tokens=args[0].shape[1], video=args[4]))
    native = run(model, inputs)
    hook.remove()
    order = _forward(model, inputs).order
    assert seen["video"] == 3 * 4 * 4
    assert order.kind == "history" and order.prefix == seen["tokens"] - seen["video"]
    out, report = _enabled_run(model, inputs, force="dense")
    assert relative_error(out, native) <= 1e-5
    assert report[0]["geometry"]["text"] == order.prefix
    # Without history the video is the whole sequence.
    plain = helios_inputs(1, 4, history=False)
    assert _forward(model, plain).order is None


def test_motif_decoder_layers_stay_native():
    case = BY_NAME["MotifVideoTransformer3DModel"]
    model = case.build()
    decoder = model.single_transformer_blocks[-1].attn
    original = decoder.processor
    handle = tsd.enable(model, density=0.3, dense_layers=0, samples=8)
    try:
        assert decoder.processor is original
        run(model, case.inputs(1, 2))
        modules = [record["module"] for record in handle.report()]
    finally:
        handle.remove()
    assert modules == ["transformer_blocks.0.attn", "single_transformer_blocks.0.attn"]


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_with_the_reason(name):
    build, word = REFUSED[name]
    model = build()
    assert type(model).__name__ == name
    with pytest.raises(NotImplementedError, match=word):
        tsd.enable(model)
    assert word in tsd.supported_models()[name]
    assert not model._forward_pre_hooks


def _forward(model, inputs):
    """What the transformer's pre-hook reads from a call with `inputs` (absent ones: None)."""
    spec = _models.spec_for(model)
    return spec.forward(model, {name: inputs.get(name) for name in spec.inputs})


def _enabled_run(model, inputs, **options):
    handle = tsd.enable(model, **options)
    try:
        return run(model, inputs), handle.report()
    finally:
        handle.remove()


def test_process_group_points_a_model_with_a_plan_at_diffusers_context_parallelism():
    model = BY_NAME["HeliosTransformer3DModel"].build()
    with pytest.raises(NotImplementedError, match="enable_parallelism"):
        tsd.enable(model, process_group=object())
    model = BY_NAME["Kandinsky6Transformer3DModel"].build()
    with pytest.raises(NotImplementedError, match="no context-parallel plan"):
        tsd.enable(model, process_group=object())
    assert not model._forward_pre_hooks
