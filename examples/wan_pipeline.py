"""A whole Wan 2.1 text-to-video denoising loop with tilesplash attention, offline.

Builds diffusers' WanPipeline from configs: a tiny random-weight
WanTransformer3DModel and AutoencoderKLWan, the UniPC flow-matching scheduler
Wan uses, and random prompt embeddings in place of the UMT5 text encoder
(nothing is downloaded). Then it switches the transformer to tilesplash,
keeping the first 20% of the denoising steps and the first layer dense as
Sparse VideoGen does, generates a short video with classifier-free guidance,
and prints how every step's attention heads ran. With --compare it also runs
the native pipeline from the same seed and prints how close the videos are.

    python examples/wan_pipeline.py                # 10 steps, 17 frames of 128 x 128
    python examples/wan_pipeline.py --steps 20 --compare

With a real checkpoint the only lines that change are the pipeline's:
    pipe = WanPipeline.from_pretrained("Wan-AI/Wan2.1-T2V-1.3B-Diffusers", torch_dtype=torch.bfloat16)
    handle = tilesplash.diffusers.enable(pipe)   # dense_steps: 20% of the run's steps by default
"""

from __future__ import annotations

import argparse
import math
import sys

import torch
from diffusers import AutoencoderKLWan, UniPCMultistepScheduler, WanPipeline, WanTransformer3DModel

import tilesplash.diffusers

TEXT_DIM = 64
TEXT_TOKENS = 32


def tiny_pipeline(seed: int = 0) -> WanPipeline:
    """Wan 2.1's architecture at toy size, random weights, no text encoder."""
    torch.manual_seed(seed)
    transformer = WanTransformer3DModel(
        patch_size=(1, 2, 2),
        num_attention_heads=4,
        attention_head_dim=64,
        in_channels=16,
        out_channels=16,
        text_dim=TEXT_DIM,
        freq_dim=64,
        ffn_dim=256,
        num_layers=4,
        rope_max_seq_len=64,
    ).eval()
    vae = AutoencoderKLWan(
        base_dim=8, z_dim=16, dim_mult=[1, 1, 1, 1], num_res_blocks=1, temperal_downsample=[False, True, True]
    ).eval()
    # Wan 2.1's scheduler config (flow matching, shift 3.0 at 480p).
    scheduler = UniPCMultistepScheduler(
        prediction_type="flow_prediction", use_flow_sigmas=True, num_train_timesteps=1000, flow_shift=3.0
    )
    return WanPipeline(tokenizer=None, text_encoder=None, transformer=transformer, vae=vae, scheduler=scheduler)


def prompt_embeddings(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Stand-ins for the UMT5 embeddings of a prompt and a negative prompt."""
    generator = torch.Generator().manual_seed(seed)
    positive = torch.randn(1, TEXT_TOKENS, TEXT_DIM, generator=generator)
    negative = torch.randn(1, TEXT_TOKENS, TEXT_DIM, generator=generator)
    return positive, negative


def generate(pipe: WanPipeline, args) -> torch.Tensor:
    positive, negative = prompt_embeddings(args.seed)
    result = pipe(
        prompt_embeds=positive,
        negative_prompt_embeds=negative,
        height=args.height,
        width=args.width,
        num_frames=args.frames,
        num_inference_steps=args.steps,
        guidance_scale=5.0,
        generator=torch.Generator().manual_seed(args.seed),
        output_type="np",
    )
    return torch.from_numpy(result.frames)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10, help="denoising steps (default 10)")
    parser.add_argument("--frames", type=int, default=17, help="video frames, 4k+1 (default 17: 5 latent frames)")
    parser.add_argument("--height", type=int, default=128, help="pixels, a multiple of 16 (default 128)")
    parser.add_argument("--width", type=int, default=128, help="pixels, a multiple of 16 (default 128)")
    parser.add_argument("--density", type=float, default=0.25, help="attention density of sparse heads (default 0.25)")
    parser.add_argument(
        "--dense-fraction", type=float, default=0.2, help="share of the first steps kept dense (default 0.2, as SVG)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compare", action="store_true", help="also run the native pipeline and compare the videos")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    if args.frames < 1 or (args.frames - 1) % 4:
        parser.error("--frames must be 4k + 1 (the VAE compresses 4 frames into one after the first)")
    if args.height < 16 or args.height % 16 or args.width < 16 or args.width % 16:
        parser.error("--height and --width must be positive multiples of 16 (VAE stride 8 x patch 2)")
    if not 0.0 <= args.dense_fraction <= 1.0:
        parser.error("--dense-fraction must be in [0, 1]")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    pipe = tiny_pipeline(args.seed)
    pipe.set_progress_bar_config(disable=True)
    dense_steps = math.ceil(args.dense_fraction * args.steps)

    # The whole pipeline: its transformer(s) switched, the step read from its scheduler.
    handle = tilesplash.diffusers.enable(pipe, density=args.density, dense_layers=1, dense_steps=dense_steps)
    try:
        video = generate(pipe, args)
        report = handle.report()
    finally:
        handle.remove()

    rows = tilesplash.diffusers.summarize(report)
    geometry = report[0]["geometry"]
    warmup = f"steps 0..{dense_steps - 1}" if dense_steps else "no steps"
    print(
        f"tilesplash on WanPipeline: {args.steps} steps with CFG, {geometry['frames']} latent frames x "
        f"{geometry['height']} x {geometry['width']} tokens, density {args.density}\n"
        f"dense warm-up: layer 0 and {warmup} (the first {args.dense_fraction:.0%} of the steps, "
        "as Sparse VideoGen keeps them)"
    )
    print(tilesplash.diffusers.summary_table(report))
    print(f"video {tuple(video.shape)}, finite: {bool(torch.isfinite(video).all())}")
    result = {"rows": rows, "video": video, "dense_steps": dense_steps}

    if args.compare:
        native = generate(pipe, args)
        a, b = video.double().flatten(), native.double().flatten()
        cosine = float(torch.nn.functional.cosine_similarity(a, b, dim=0))
        mse = float(((a - b) ** 2).mean())
        psnr = 10 * math.log10(1.0 / mse) if mse > 0 else math.inf  # frames are in [0, 1]
        print(f"against native attention: cosine {cosine:.5f}, PSNR {psnr:.1f} dB")
        result.update(cosine=cosine, psnr=psnr)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
