"""How close tilesplash's sparse video is to the dense one: PSNR and SSIM of the frames, offline.

Builds a tiny random-weight Wan 2.1 or HunyuanVideo pipeline from configs
(nothing is downloaded; prompt embeddings stand in for the text encoders),
runs it dense and with tilesplash from the same seed through
tilesplash.diffusers.fidelity, and prints PSNR and SSIM per frame and
overall, and the attention error per layer and step. The field's protocol
(docs/diffusers.md) keeps the first 20% of the steps and layer 0 dense.

    python examples/fidelity.py                          # tiny Wan, 8 steps
    python examples/fidelity.py --model hunyuan --plot fidelity.png --json fidelity.json

With a real checkpoint only the pipeline changes:
    pipe = WanPipeline.from_pretrained("Wan-AI/Wan2.1-T2V-14B-Diffusers", torch_dtype=torch.bfloat16).to("cuda")
    result = tilesplash.diffusers.fidelity(pipe, {"prompt": "...", "height": 720, "width": 1280,
                                                  "num_frames": 81, "num_inference_steps": 50}, density=0.25)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

import torch

import tilesplash.diffusers


def tiny_wan():
    from diffusers import AutoencoderKLWan, UniPCMultistepScheduler, WanPipeline, WanTransformer3DModel

    torch.manual_seed(0)
    transformer = WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=4, attention_head_dim=32,
                                        in_channels=4, out_channels=4, text_dim=16, freq_dim=32, ffn_dim=64,
                                        num_layers=4, rope_max_seq_len=64).eval()
    vae = AutoencoderKLWan(base_dim=8, z_dim=4, dim_mult=[1, 1, 1, 1], num_res_blocks=1,
                           temperal_downsample=[False, True, True], latents_mean=[0.0] * 4,
                           latents_std=[1.0] * 4).eval()
    scheduler = UniPCMultistepScheduler(prediction_type="flow_prediction", use_flow_sigmas=True,
                                        num_train_timesteps=1000, flow_shift=3.0)
    pipe = WanPipeline(tokenizer=None, text_encoder=None, transformer=transformer, vae=vae, scheduler=scheduler)
    g = torch.Generator().manual_seed(0)
    call = {"prompt_embeds": torch.randn(1, 8, 16, generator=g),
            "negative_prompt_embeds": torch.randn(1, 8, 16, generator=g), "guidance_scale": 5.0}
    return pipe, call


def tiny_hunyuan():
    from diffusers import (AutoencoderKLHunyuanVideo, FlowMatchEulerDiscreteScheduler, HunyuanVideoPipeline,
                           HunyuanVideoTransformer3DModel)

    torch.manual_seed(0)
    transformer = HunyuanVideoTransformer3DModel(in_channels=4, out_channels=4, num_attention_heads=4,
                                                 attention_head_dim=16, num_layers=2, num_single_layers=2,
                                                 num_refiner_layers=1, patch_size=2, patch_size_t=1,
                                                 text_embed_dim=16, pooled_projection_dim=8,
                                                 rope_axes_dim=(4, 6, 6)).eval()
    vae = AutoencoderKLHunyuanVideo(
        in_channels=3, out_channels=3, latent_channels=4,
        down_block_types=("HunyuanVideoDownBlock3D",) * 4, up_block_types=("HunyuanVideoUpBlock3D",) * 4,
        block_out_channels=(8, 8, 8, 8), layers_per_block=1, norm_num_groups=4,
        spatial_compression_ratio=8, temporal_compression_ratio=4).eval()
    pipe = HunyuanVideoPipeline(text_encoder=None, tokenizer=None, text_encoder_2=None, tokenizer_2=None,
                                transformer=transformer, vae=vae, scheduler=FlowMatchEulerDiscreteScheduler(shift=7.0))
    g = torch.Generator().manual_seed(0)
    mask = torch.ones(1, 12)
    mask[:, 7:] = 0  # 7 prompt tokens, 5 padding
    call = {"prompt_embeds": torch.randn(1, 12, 16, generator=g), "prompt_attention_mask": mask,
            "pooled_prompt_embeds": torch.randn(1, 8, generator=g)}
    return pipe, call


MODELS = {"wan": tiny_wan, "hunyuan": tiny_hunyuan}


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="wan", help="tiny pipeline (default wan)")
    parser.add_argument("--steps", type=int, default=8, help="denoising steps (default 8)")
    parser.add_argument("--frames", type=int, default=17, help="video frames, 4k+1 (default 17)")
    parser.add_argument("--size", type=int, default=96, help="height and width in pixels, a multiple of 16 (default 96)")
    parser.add_argument("--method", default="svg", help="tilesplash.methods() name (default svg)")
    parser.add_argument("--density", type=float, default=0.25, help="density of sparse heads (default 0.25)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--plot", help="write the picture (PNG) here")
    parser.add_argument("--json", help="write the result (JSON, without the report) here")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps must be >= 1")
    if args.frames < 1 or (args.frames - 1) % 4:
        parser.error("--frames must be 4k + 1 (the VAE compresses 4 frames into one after the first)")
    if args.size < 16 or args.size % 16:
        parser.error("--size must be a positive multiple of 16 (VAE stride 8 x patch 2)")
    outputs = [path for path in (args.plot, args.json) if path is not None]
    if len(set(map(os.path.abspath, outputs))) < len(outputs):
        parser.error("--plot and --json name the same file: one output would overwrite the other")
    for path in outputs:
        if path == "" or os.path.isdir(path) or not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            parser.error(f"cannot write {path!r}: expected a file in an existing directory")
    return args


def main(argv=None):
    args = parse_args(argv)
    pipe, call = MODELS[args.model]()
    pipe.set_progress_bar_config(disable=True)
    call.update(height=args.size, width=args.size, num_frames=args.frames, num_inference_steps=args.steps)
    result = tilesplash.diffusers.fidelity(pipe, call, seed=args.seed, method=args.method, density=args.density)
    print(f"tilesplash fidelity, tiny {args.model}: {args.steps} steps, {args.frames} frames of {args.size}^2, "
          f"method {args.method}, density {args.density}, against dense from seed {args.seed}")
    print("frame      psnr_db     ssim")
    for index, frame in enumerate(result.frames):
        print(f"{index:>5}  {frame['psnr']:>11.2f}  {frame['ssim']:.5f}")
    whole = "inf (identical)" if math.isinf(result.psnr) else f"{result.psnr:.2f} dB"
    print(f"video: PSNR {whole}, SSIM {result.ssim:.5f}, LPIPS "
          f"{result.lpips if result.lpips is not None else 'not computed: ' + result.lpips_note}")
    print("layer  step  attention_error  density")
    for row in result.attention:
        print(f"{row['layer']:>5}  {row['step']:>4}  {row['error']:>15.4f}  {row['density']:.3f}")
    if args.plot:
        tilesplash.diffusers.plot_fidelity(result, args.plot)
        print(f"picture: {args.plot}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result.as_dict(), handle, indent=1)
        print(f"result: {args.json}")
    return result


if __name__ == "__main__":
    sys.exit(0 if main() is not None else 1)
