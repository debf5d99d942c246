"""Rank-side code of the diffusers process_group tests (run inside dist_harness ranks).

Every rank builds the same tiny random-weight Wan transformer and inputs
(tests/python/diffusers_tiny.py), enables tilesplash over the default group,
and returns the full output and the report's per-head choices; the test
runs the same settings in one process.
"""

from __future__ import annotations

import time

import torch

import tilesplash.diffusers as tsd
from diffusers_tiny import FRAMES, HEADS, run_wan, tiny_wan, wan_inputs

# name: (enable keyword arguments, latent frames of the input, timesteps called)
DIFFUSERS_CASES = {
    "dense": (dict(force="dense"), FRAMES, [900.0]),
    "routed": (dict(density=0.25, dense_layers=1), FRAMES, [900.0, 800.0]),
    "routed_uneven": (dict(density=0.25, dense_layers=1, method="mix", density_budget=0.35), 5,
                      [700.0]),
    # Wan 2.1 I2V: image tokens join the text in cross-attention (held whole by every rank).
    "i2v_routed": (dict(density=0.25, dense_layers=1), 4, [600.0]),
}


def tiny_wan_i2v():
    from diffusers import WanTransformer3DModel

    torch.manual_seed(0)
    return WanTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=HEADS, attention_head_dim=64, in_channels=8,
        out_channels=4, text_dim=32, freq_dim=32, ffn_dim=64, num_layers=2, rope_max_seq_len=64,
        image_dim=16, added_kv_proj_dim=HEADS * 64).eval()


def run_i2v(model, timestep):
    generator = torch.Generator().manual_seed(3)
    with torch.no_grad():
        return model(hidden_states=torch.randn(1, 8, 4, 16, 16, generator=generator),
                     timestep=torch.tensor([timestep]),
                     encoder_hidden_states=torch.randn(1, 512, 32, generator=generator),
                     encoder_hidden_states_image=torch.randn(1, 257, 16, generator=generator),
                     return_dict=False)[0]


def choices(report):
    return [(r["layer"], r["step"], [(h["batch"], h["head"], h["choice"]) for h in r["heads"]])
            for r in report]


def run_case(name, process_group=None, timeout=None):
    """(outputs per call, choices) of one case; with process_group over that group."""
    kwargs, frames, timesteps = DIFFUSERS_CASES[name]
    model = tiny_wan_i2v() if name.startswith("i2v") else tiny_wan()
    hidden, text = wan_inputs(frames=frames)
    extra = {} if process_group is None else {"process_group": process_group, "timeout": timeout}
    handle = tsd.enable(model, threads=1, **kwargs, **extra)
    try:
        if name.startswith("i2v"):
            outs = [run_i2v(model, t) for t in timesteps]
        else:
            outs = [run_wan(model, hidden, text, timestep=t) for t in timesteps]
        return [o.numpy() for o in outs], choices(handle.report())
    finally:
        handle.remove()


def run_diffusers_cases(rank, world, names):
    import torch.distributed as dist

    return {name: run_case(name, dist.group.WORLD, timeout=60) for name in names}


def diffusers_rank_fails(rank, world):
    """The last rank fails before calling the transformer: the others raise within the timeout."""
    import torch.distributed as dist

    model = tiny_wan(layers=1)
    handle = tsd.enable(model, threads=1, process_group=dist.group.WORLD, timeout=2)
    if rank == world - 1:
        raise RuntimeError("the last rank failed before the call")
    hidden, text = wan_inputs()
    start = time.monotonic()
    try:
        run_wan(model, hidden, text)
    except Exception as error:
        return type(error).__name__, str(error), time.monotonic() - start
    finally:
        handle.remove()
    return None, "no error", time.monotonic() - start
