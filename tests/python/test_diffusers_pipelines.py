"""enable(pipe): every transformer of a pipeline on one handle, the step from its scheduler.

Whole denoising loops, tiny and offline (prompt embeddings instead of text encoders, latents
out): Wan 2.2 A14B's two experts (transformer for high noise, transformer_2 for low noise)
and HunyuanVideo with a prompt and a negative prompt padded to different lengths (true CFG).
Then the quality knobs on the step count the scheduler gives: dense_steps (by default the first
20% of the steps), dense_layers and dense_last_steps.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
tsd = pytest.importorskip("tilesplash.diffusers")

from diffusers_models import BY_NAME, relative_error  # noqa: E402

DENSE_TOLERANCE = 1e-5
STEPS = 5


@pytest.fixture(scope="module")
def wan22():
    from diffusers import AutoencoderKLWan, UniPCMultistepScheduler, WanPipeline

    case = BY_NAME["WanTransformer3DModel"]
    high = case.build()
    torch.manual_seed(1)
    low = case.make().eval()
    vae = AutoencoderKLWan(base_dim=8, z_dim=4, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                           temperal_downsample=[False, True, True]).eval()
    scheduler = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
                                        num_train_timesteps=1000, flow_shift=3.0)
    return WanPipeline(tokenizer=None, text_encoder=None, vae=vae, scheduler=scheduler,
                       transformer=high, transformer_2=low, boundary_ratio=0.875)


def _wan22_run(pipe):
    g = torch.Generator().manual_seed(0)
    positive, negative = torch.randn(1, 6, 16, generator=g), torch.randn(1, 6, 16, generator=g)
    return pipe(prompt_embeds=positive, negative_prompt_embeds=negative, height=64, width=64,
                num_frames=9, num_inference_steps=STEPS, guidance_scale=5.0, guidance_scale_2=4.0,
                generator=torch.Generator().manual_seed(0), output_type="latent").frames


def test_wan22_two_experts_one_handle(wan22):
    native = _wan22_run(wan22)
    experts = [wan22.transformer, wan22.transformer_2]
    originals = [[block.attn1.processor for block in expert.blocks] for expert in experts]
    handle = tsd.enable(wan22, force="dense")
    assert handle.transformers == ["transformer", "transformer_2"]
    try:
        out = _wan22_run(wan22)
        report = handle.report()
    finally:
        handle.remove()
    assert relative_error(out, native) <= DENSE_TOLERANCE
    # One count of steps for both experts, from the scheduler: each step two CFG calls of one
    # expert, the high-noise expert first.
    layer0 = [(record["step"], record["transformer"]) for record in report if record["layer"] == 0]
    steps = [step for step, _ in layer0]
    assert steps == [step for step in range(STEPS) for _ in range(2)]
    experts_run = [name for _, name in layer0]
    switch = experts_run.index("transformer_2")
    assert 0 < switch < len(layer0) and set(experts_run[switch:]) == {"transformer_2"}
    assert [[block.attn1.processor for block in expert.blocks] for expert in experts] == originals
    assert torch.equal(_wan22_run(wan22), native)


def test_wan22_quality_knobs_on_the_scheduler_steps(wan22):
    # dense_steps=None: the first 20% of the 5 steps (one); the last step dense too; layer 0 always.
    handle = tsd.enable(wan22, density=0.3, dense_last_steps=1, samples=8)
    try:
        _wan22_run(wan22)
        report = handle.report()
    finally:
        handle.remove()
    for record in report:
        dense = {head["choice"] for head in record["heads"]} == {"dense"}
        expected = record["layer"] < 1 or record["step"] < 1 or record["step"] >= STEPS - 1
        assert dense == expected, (record["step"], record["layer"], record["transformer"])
        assert record["warmup"] == expected
    handle = tsd.enable(wan22, density=0.3, dense_steps=3, dense_layers=0, samples=8)
    try:
        _wan22_run(wan22)
        dense_steps = {record["step"] for record in handle.report()
                       if {head["choice"] for head in record["heads"]} == {"dense"}}
    finally:
        handle.remove()
    assert dense_steps == {0, 1, 2}


def test_quality_knobs_need_a_step_count_without_a_pipeline():
    case = BY_NAME["WanTransformer3DModel"]
    model = case.build()
    with pytest.raises(ValueError, match="dense_last_steps needs the number of steps"):
        tsd.enable(model, dense_last_steps=2)
    inputs = case.inputs(1, 2)
    handle = tsd.enable(model, dense_last_steps=2, total_steps=4, dense_layers=0, samples=8)
    try:
        with torch.no_grad():
            for t in (900.0, 700.0, 500.0, 300.0):
                model(**dict(inputs, timestep=torch.tensor([t])), return_dict=False)
        dense = [{head["choice"] for head in record["heads"]} == {"dense"} for record in handle.report()
                 if record["layer"] == 0]
    finally:
        handle.remove()
    # total_steps=4 and the default dense_steps: the first step (20%, rounded up), the last two.
    assert dense == [True, False, True, True]


def test_hunyuan_video_pipeline_with_padded_prompts():
    from diffusers import AutoencoderKLHunyuanVideo, FlowMatchEulerDiscreteScheduler, HunyuanVideoPipeline

    transformer = BY_NAME["HunyuanVideoTransformer3DModel"].build()
    vae = AutoencoderKLHunyuanVideo(
        in_channels=3, out_channels=3, latent_channels=4,
        down_block_types=("HunyuanVideoDownBlock3D",) * 4, up_block_types=("HunyuanVideoUpBlock3D",) * 4,
        block_out_channels=(8, 8, 8, 8), layers_per_block=1, norm_num_groups=4,
        spatial_compression_ratio=8, temporal_compression_ratio=4).eval()
    pipe = HunyuanVideoPipeline(text_encoder=None, tokenizer=None, transformer=transformer, vae=vae,
                                scheduler=FlowMatchEulerDiscreteScheduler(shift=7.0),
                                text_encoder_2=None, tokenizer_2=None)
    g = torch.Generator().manual_seed(0)
    prompt, negative = torch.randn(1, 10, 16, generator=g), torch.randn(1, 10, 16, generator=g)
    prompt_mask, negative_mask = torch.ones(1, 10), torch.ones(1, 10)
    prompt_mask[:, 4:] = 0  # 4 real tokens, 6 padding
    negative_mask[:, 7:] = 0
    pooled, negative_pooled = torch.randn(1, 8, generator=g), torch.randn(1, 8, generator=g)

    def generate():
        return pipe(prompt_embeds=prompt, pooled_prompt_embeds=pooled, prompt_attention_mask=prompt_mask,
                    negative_prompt_embeds=negative, negative_pooled_prompt_embeds=negative_pooled,
                    negative_prompt_attention_mask=negative_mask, true_cfg_scale=3.0, height=64,
                    width=64, num_frames=9, num_inference_steps=3,
                    generator=torch.Generator().manual_seed(0), output_type="latent").frames

    native = generate()
    handle = tsd.enable(pipe, force="dense")
    try:
        out = generate()
        layer0 = [(record["step"], record["geometry"]["key_lengths"]) for record in handle.report()
                  if record["layer"] == 0]
    finally:
        handle.remove()
    assert relative_error(out, native) <= DENSE_TOLERANCE
    video = 3 * 4 * 4  # 9 frames of 64 x 64: 3 latent frames of 8 x 8, patches of 2 x 2
    assert layer0 == [(step, [video + n]) for step in range(3) for n in (4, 7)]
    handle = tsd.enable(pipe, density=0.3, samples=8)
    try:
        sparse = generate()
    finally:
        handle.remove()
    assert torch.isfinite(sparse).all() and not torch.equal(sparse, native)
