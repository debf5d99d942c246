"""Each model's documented quirks: padded prompts as key padding (HunyuanVideo, its 1.5,
FramePack, Mochi, Motif-Video), token orders that are not frame-major (FramePack's history, Kandinsky 5's
NABLA tiles), Wan 2.2 TI2V's per-token timesteps, and the configurations refused with
NotImplementedError, each saying why."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
tsd = pytest.importorskip("tilesplash.diffusers")

# diffusers' Mochi asks for a float32 CPU autocast, which torch declines with a warning.
pytestmark = pytest.mark.filterwarnings("ignore:In CPU autocast")

from diffusers_models import BY_NAME, hunyuan15_inputs, hunyuan_inputs, kandinsky_inputs, mochi_inputs  # noqa: E402
from diffusers_models import relative_error, run  # noqa: E402
from diffusers_models_042 import motif_inputs  # noqa: E402

DENSE_TOLERANCE = 1e-5


def _enabled_run(model, inputs, **options):
    handle = tsd.enable(model, **options)
    try:
        return run(model, inputs), handle.report()
    finally:
        handle.remove()


@pytest.mark.parametrize("name,make_inputs,video", [
    ("HunyuanVideoTransformer3DModel", hunyuan_inputs, 48),
    ("MochiTransformer3DModel", mochi_inputs, 48),
    ("MotifVideoTransformer3DModel", motif_inputs, 48),
])
def test_padded_prompts_of_different_lengths(name, make_inputs, video):
    # Batched prompts of 4 and 10 real tokens in 10 slots (CFG's prompt and negative prompt).
    model = BY_NAME[name].build()
    inputs = make_inputs(2, 3, lengths=[4, 10])
    native = run(model, inputs)
    out, report = _enabled_run(model, inputs, force="dense")
    assert relative_error(out, native) <= DENSE_TOLERANCE
    assert {tuple(record["geometry"]["key_lengths"]) for record in report} == {(video + 4, video + 10)}
    out, report = _enabled_run(model, inputs, density=1.0, dense_layers=0, samples=8)
    assert relative_error(out, native) <= DENSE_TOLERANCE
    # Each entry as its own batch of one gives the same output: padding is per entry.
    for b in range(2):
        alone = {key: value[b:b + 1] if torch.is_tensor(value) and value.shape[:1] == (2,) else value
                 for key, value in inputs.items()}
        single, _ = _enabled_run(model, alone, force="dense")
        assert relative_error(single[0], native[b]) <= DENSE_TOLERANCE
    sparse, report = _enabled_run(model, inputs, density=0.3, dense_layers=0, samples=8)
    assert torch.isfinite(sparse).all() and not torch.equal(sparse, native)


def test_padding_would_change_the_output_if_ignored():
    # The equality above means something only if attending the padded keys changes the output.
    model = BY_NAME["HunyuanVideoTransformer3DModel"].build()
    padded = hunyuan_inputs(1, 3, lengths=[4])
    unmasked = dict(padded, encoder_attention_mask=torch.ones(1, 10))
    assert relative_error(run(model, unmasked), run(model, padded)) > 100 * DENSE_TOLERANCE


def test_hunyuan15_key_and_query_mask():
    model = BY_NAME["HunyuanVideo15Transformer3DModel"].build()
    inputs = hunyuan15_inputs(2, 4, lengths=[2, 6])
    native = run(model, inputs)
    out, report = _enabled_run(model, inputs, force="dense")
    assert relative_error(out, native) <= DENSE_TOLERANCE
    # 32 video tokens, then the real byT5 (4) and prompt tokens; the zero image embeds are padding.
    assert report[0]["geometry"]["key_lengths"] == [32 + 4 + 2, 32 + 4 + 6]


def test_framepack_history_moves_after_the_video_with_padding():
    case = BY_NAME["HunyuanVideoFramepackTransformer3DModel"]
    model = case.build()
    inputs = case.inputs(2, 5)
    inputs["encoder_attention_mask"] = torch.tensor([[1.0] * 3 + [0.0] * 7, [1.0] * 10])
    native = run(model, inputs)
    out, report = _enabled_run(model, inputs, force="dense")
    assert relative_error(out, native) <= DENSE_TOLERANCE
    history, image = 32 + 4 + 1, 4
    assert report[0]["geometry"]["text"] == history + image + 10
    assert report[0]["geometry"]["key_lengths"] == [48 + history + image + 3, 48 + history + image + 10]
    out, _ = _enabled_run(model, inputs, density=1.0, dense_layers=0, samples=8)
    assert relative_error(out, native) <= DENSE_TOLERANCE


def test_kandinsky_nabla_tile_order_runs_frame_major():
    # attention_type="nabla" orders the tokens in 8 x 8 tiles and passes NABLA's block mask;
    # tilesplash replaces NABLA and runs the tokens permuted to frame-major order, so dense
    # equals the model's dense attention in its frame-major order.
    model = BY_NAME["Kandinsky5Transformer3DModel"].build()
    inputs = kandinsky_inputs(1, 6, height=32, width=16)  # 16 x 8 tokens: 2 x 1 tiles per frame
    native = run(model, inputs)
    blocks = 3 * 16 * 8 // 64
    sparse_params = {"to_fractal": True, "sta_mask": torch.ones(1, 1, blocks, blocks, dtype=torch.bool),
                     "P": 0.9, "attention_type": "nabla"}
    nabla = dict(inputs, sparse_params=sparse_params)
    out, report = _enabled_run(model, nabla, force="dense")
    assert relative_error(out, native) <= DENSE_TOLERANCE
    out, _ = _enabled_run(model, nabla, density=1.0, dense_layers=0, samples=8)
    assert relative_error(out, native) <= DENSE_TOLERANCE
    # The permutation matters: sparse masks on the tile order would be other masks.
    tiled, _ = _enabled_run(model, nabla, force="spatial", dense_layers=0)
    plain, _ = _enabled_run(model, inputs, force="spatial", dense_layers=0)
    assert relative_error(tiled, plain) <= DENSE_TOLERANCE


def test_wan22_ti2v_per_token_timesteps():
    # Wan 2.2 TI2V-5B: timestep [batch, tokens], the conditioning frame's tokens at 0.
    case = BY_NAME["WanTransformer3DModel"]
    model = case.build()
    inputs = case.inputs(1, 7)
    per_token = torch.full((1, 48), 900.0)
    per_token[:, :16] = 0.0
    inputs["timestep"] = per_token
    native = run(model, inputs)
    handle = tsd.enable(model, force="dense")
    try:
        assert relative_error(run(model, inputs), native) <= DENSE_TOLERANCE
        run(model, inputs)  # the same timesteps: the same step
        later = per_token.clone()
        later[:, 16:] = 800.0
        run(model, dict(inputs, timestep=later))
        steps = [record["step"] for record in handle.report() if record["layer"] == 0]
    finally:
        handle.remove()
    assert steps == [0, 0, 1]


def test_ltx_without_a_latent_grid_is_refused():
    case = BY_NAME["LTXVideoTransformer3DModel"]
    model = case.build()
    inputs = dict(case.inputs(1, 1), num_frames=None, height=None, width=None,
                  video_coords=torch.zeros(1, 3, 72))
    handle = tsd.enable(model)
    try:
        with pytest.raises(NotImplementedError, match="no frames x height x width grid"):
            run(model, inputs)
    finally:
        handle.remove()


def test_ltx2_video_self_attention_mask_is_refused():
    case = BY_NAME["LTX2VideoTransformer3DModel"]
    model = case.build()
    inputs = dict(case.inputs(1, 1), video_self_attention_mask=torch.ones(1, 72, 72))
    handle = tsd.enable(model)
    try:
        with pytest.raises(NotImplementedError, match="video_self_attention_mask"):
            run(model, inputs)
    finally:
        handle.remove()


def test_skyreels_block_causal_diffusion_forcing_is_refused():
    case = BY_NAME["SkyReelsV2Transformer3DModel"]
    model = case.build()
    model._set_ar_attention(3)  # what the pipelines do for causal_block_size=3
    handle = tsd.enable(model)
    try:
        with pytest.raises(NotImplementedError, match="num_frame_per_block"):
            run(model, case.inputs(1, 1))
    finally:
        handle.remove()


def test_allegro_video_padding_mask():
    case = BY_NAME["AllegroTransformer3DModel"]
    model = case.build()
    inputs = dict(case.inputs(1, 1), attention_mask=torch.ones(1, 3, 8, 8))
    native = run(model, inputs)
    out, _ = _enabled_run(model, inputs, force="dense")
    assert relative_error(out, native) <= DENSE_TOLERANCE  # nothing padded: served
    padded = torch.ones(1, 3, 8, 8)
    padded[:, 2] = 0  # the last frame padded: video tokens, not trailing text
    handle = tsd.enable(model)
    try:
        with pytest.raises(NotImplementedError, match="drops keys"):
            run(model, dict(inputs, attention_mask=padded))
    finally:
        handle.remove()


def test_sana_video_is_refused_with_the_reason():
    from diffusers import SanaVideoTransformer3DModel

    model = SanaVideoTransformer3DModel(in_channels=4, out_channels=4, num_attention_heads=2,
                                        attention_head_dim=8, num_layers=1, num_cross_attention_heads=2,
                                        cross_attention_head_dim=8, cross_attention_dim=16,
                                        caption_channels=16, sample_size=8)
    with pytest.raises(NotImplementedError, match="linear attention"):
        tsd.enable(model)
    assert "linear attention" in tsd.supported_models()["SanaVideoTransformer3DModel"]


def test_unknown_models_are_refused():
    with pytest.raises(TypeError, match="HunyuanVideoTransformer3DModel"):
        tsd.enable(torch.nn.Linear(2, 2))
