"""The models bench/wan_block.py times one block of: released configs, one layer, random weights.

Each entry builds the model (its released transformer config with a single block of the
kind timed), the inputs of one forward at a given latent shape, and says which block and
which attention module to time. Shapes are after patching (frames x height x width tokens).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class BlockModel:
    name: str  # --model
    label: str  # what the output calls it
    heads: int
    head_dim: int
    shape: tuple[int, int, int]  # default latent frames, height, width after patching
    text: int  # text slots joined to the video in self-attention (0: cross-attention only)
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[tuple[int, int, int], torch.Generator, int], dict]  # (shape, generator, prompt tokens)
    block: Callable[[torch.nn.Module], torch.nn.Module]  # the block timed
    attention: str  # its self-attention module's attribute


# Wan 2.1 T2V 1.3B (Wan-AI/Wan2.1-T2V-1.3B-Diffusers transformer/config.json).
WAN_1_3B = dict(patch_size=(1, 2, 2), num_attention_heads=12, attention_head_dim=128, in_channels=16,
                out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=8960, cross_attn_norm=True,
                qk_norm="rms_norm_across_heads", eps=1e-6, rope_max_seq_len=1024)

# HunyuanVideo T2V (hunyuanvideo-community/HunyuanVideo transformer/config.json): the class
# defaults; one single-stream block (40 of its 60 layers are this kind).
HUNYUAN = dict(in_channels=16, out_channels=16, num_attention_heads=24, attention_head_dim=128,
               num_layers=0, num_single_layers=1, num_refiner_layers=2, patch_size=2, patch_size_t=1,
               guidance_embeds=True, text_embed_dim=4096, pooled_projection_dim=768)

# LTX-Video 0.9 (Lightricks/LTX-Video transformer/config.json): the class defaults, one block.
LTX = dict(in_channels=128, out_channels=128, patch_size=1, patch_size_t=1, num_attention_heads=32,
           attention_head_dim=64, cross_attention_dim=2048, num_layers=1, caption_channels=4096)


def _wan():
    from diffusers import WanTransformer3DModel
    return WanTransformer3DModel(num_layers=1, **WAN_1_3B)


def _wan_inputs(shape, generator, prompt_tokens):
    frames, height, width = shape
    return {"hidden_states": torch.randn(1, 16, frames, 2 * height, 2 * width, generator=generator),
            "timestep": torch.tensor([500]),
            # UMT5's 512 slots; Wan's text enters through cross-attention only
            "encoder_hidden_states": torch.randn(1, 512, 4096, generator=generator)}


def _hunyuan():
    from diffusers import HunyuanVideoTransformer3DModel
    return HunyuanVideoTransformer3DModel(**HUNYUAN)


def _hunyuan_inputs(shape, generator, prompt_tokens):
    frames, height, width = shape
    mask = torch.zeros(1, 256)
    mask[:, :prompt_tokens] = 1  # the prompt's real tokens; the rest of the 256 slots padding
    return {"hidden_states": torch.randn(1, 16, frames, 2 * height, 2 * width, generator=generator),
            "timestep": torch.tensor([500]),
            "encoder_hidden_states": torch.randn(1, 256, 4096, generator=generator),
            "encoder_attention_mask": mask,
            "pooled_projections": torch.randn(1, 768, generator=generator),
            "guidance": torch.tensor([6000.0])}


def _ltx():
    from diffusers import LTXVideoTransformer3DModel
    return LTXVideoTransformer3DModel(**LTX)


def _ltx_inputs(shape, generator, prompt_tokens):
    frames, height, width = shape
    mask = torch.zeros(1, 128)
    mask[:, :prompt_tokens] = 1
    return {"hidden_states": torch.randn(1, frames * height * width, 128, generator=generator),
            "encoder_hidden_states": torch.randn(1, 128, 4096, generator=generator),
            "timestep": torch.tensor([500]),
            "encoder_attention_mask": mask,
            "num_frames": frames, "height": height, "width": width}


MODELS = {
    # 480 x 832, 81 frames: 21 latent frames of 30 x 52 tokens (DESIGN's Wan 2.1 1.3B row)
    "wan": BlockModel("wan", "Wan 2.1 1.3B block", 12, 128, (21, 30, 52), 0, _wan, _wan_inputs,
                      lambda m: m.blocks[0], "attn1"),
    # 480 x 848, 129 frames: 33 latent frames of 30 x 53 tokens, 256 text slots after them
    "hunyuan": BlockModel("hunyuan", "HunyuanVideo single-stream block", 24, 128, (33, 30, 53), 256,
                          _hunyuan, _hunyuan_inputs, lambda m: m.single_transformer_blocks[0], "attn"),
    # 512 x 768, 121 frames: VAE (8, 32, 32), patch 1: 16 latent frames of 16 x 24 tokens
    "ltx": BlockModel("ltx", "LTX-Video block", 32, 64, (16, 16, 24), 0, _ltx, _ltx_inputs,
                      lambda m: m.transformer_blocks[0], "attn1"),
}


def shape_for_tokens(model: BlockModel, tokens: int) -> tuple[int, int, int]:
    """The model's default frames at its default aspect, scaled to about `tokens` video tokens."""
    frames, height, width = model.shape
    per_frame = tokens / frames
    h = max(1, round(math.sqrt(per_frame * height / width)))
    return frames, h, max(1, round(per_frame / h))
