"""A Wan transformer's self-attention split over processes with tilesplash (sequence parallelism).

Launch with torchrun; every rank runs this script:

    PYTHONPATH=build/python torchrun --nproc-per-node 2 examples/wan_sequence_parallel.py
    # (or after `pip install .`, without PYTHONPATH)

Every rank builds the same tiny random-weight WanTransformer3DModel (nothing
is downloaded) and calls it with the same full inputs, for a few denoising
steps; `tilesplash.diffusers.enable(..., process_group=...)` splits the
sequence inside it, so each rank computes its share of every layer and all
ranks return the same full output. Rank 0 then runs the same steps in one
process and checks that outputs and the per-head routing decisions agree.
With a real model only the model's lines change:

    pipe = WanPipeline.from_pretrained("Wan-AI/Wan2.1-T2V-1.3B-Diffusers", torch_dtype=torch.bfloat16)
    tilesplash.diffusers.enable(pipe.transformer, dense_steps=10, process_group=dist.group.WORLD,
                                threads=cores_per_rank)
    video = pipe(prompt, generator=torch.Generator().manual_seed(0)).frames  # same seed on every rank
"""

from __future__ import annotations

import argparse
import os

import torch
import torch.distributed as dist
from diffusers import WanTransformer3DModel

import tilesplash.diffusers


def tiny_wan() -> WanTransformer3DModel:
    torch.manual_seed(0)  # the same weights on every rank
    return WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=4, attention_head_dim=32,
                                 in_channels=4, out_channels=4, text_dim=32, freq_dim=32,
                                 ffn_dim=128, num_layers=4, rope_max_seq_len=64).eval()


def denoise(model, steps: int, frames: int):
    """The transformer's outputs at `steps` timesteps, and tilesplash's per-head choices."""
    generator = torch.Generator().manual_seed(1)  # the same inputs on every rank
    hidden = torch.randn(1, 4, frames, 24, 32, generator=generator)
    text = torch.randn(1, 16, 32, generator=generator)
    outputs = []
    with torch.no_grad():
        for t in torch.linspace(999, 100, steps):
            outputs.append(model(hidden_states=hidden, timestep=t.reshape(1),
                                 encoder_hidden_states=text, return_dict=False)[0])
    return outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--frames", type=int, default=5, help="latent frames (x 12 x 16 tokens each)")
    args = parser.parse_args()

    dist.init_process_group("gloo")  # torchrun's environment says where the others are
    rank, world = dist.get_rank(), dist.get_world_size()
    threads = max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", world)))

    model = tiny_wan()
    settings = dict(density=0.25, dense_layers=1, dense_steps=1, threads=threads)
    handle = tilesplash.diffusers.enable(model, process_group=dist.group.WORLD, **settings)
    outputs = denoise(model, args.steps, args.frames)
    report = handle.report()
    handle.remove()

    group = report[-1]["group"]  # where this rank's share lay in the last call
    begin, end = group["heads"]
    print(f"rank {rank} of {world}: {group['shards'][rank]} of {sum(group['shards'])} tokens, "
          f"heads [{begin}, {end}) of {len(report[-1]['heads'])}, threads={threads}")
    if rank == 0:
        single = tiny_wan()
        handle = tilesplash.diffusers.enable(single, **settings)
        expected = denoise(single, args.steps, args.frames)
        same_choices = all(
            [h["choice"] for h in a["heads"]] == [h["choice"] for h in b["heads"]]
            for a, b in zip(report, handle.report()))
        worst = max(float((o - e).abs().max() / e.abs().max()) for o, e in zip(outputs, expected))
        print(tilesplash.diffusers.summary_table(report))
        print(f"against one process: the same choice for every head of every call: {same_choices}; "
              f"largest relative difference of the outputs {worst:.2e}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
