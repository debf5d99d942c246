"""Tiny random-weight diffusers video transformers for the drop-in tests (nothing downloaded).

Small enough to run in milliseconds, big enough that a 25% mask differs from
dense: 6 latent frames of 8 x 8 tokens after patching (384 tokens), 2 heads
of dimension 64, 3 layers (so dense_layers=1 leaves two sparse ones).
"""

from __future__ import annotations

import torch

HEADS = 2
HEAD_DIM = 64
LAYERS = 3
IN_CHANNELS = 4
TEXT_DIM = 32
TEXT_TOKENS = 16
FRAMES, HEIGHT, WIDTH = 6, 16, 16  # latent input; (1, 2, 2) patching gives 6 x 8 x 8 tokens
TOKENS = FRAMES * (HEIGHT // 2) * (WIDTH // 2)


def tiny_wan(seed: int = 0, layers: int = LAYERS, dtype: torch.dtype = torch.float32):
    from diffusers import WanTransformer3DModel

    torch.manual_seed(seed)
    model = WanTransformer3DModel(
        patch_size=(1, 2, 2),
        num_attention_heads=HEADS,
        attention_head_dim=HEAD_DIM,
        in_channels=IN_CHANNELS,
        out_channels=IN_CHANNELS,
        text_dim=TEXT_DIM,
        freq_dim=32,
        ffn_dim=64,
        num_layers=layers,
        rope_max_seq_len=64,
    )
    if dtype != torch.float32:
        model = model.to(dtype)
    return model.eval()


def wan_inputs(seed: int = 1, batch: int = 1, frames: int = FRAMES, height: int = HEIGHT, width: int = WIDTH,
               dtype: torch.dtype = torch.float32):
    generator = torch.Generator().manual_seed(seed)
    hidden = torch.randn(batch, IN_CHANNELS, frames, height, width, generator=generator).to(dtype)
    text = torch.randn(batch, TEXT_TOKENS, TEXT_DIM, generator=generator).to(dtype)
    return hidden, text


def run_wan(model, hidden, text, timestep: float = 500.0) -> torch.Tensor:
    batch = hidden.shape[0]
    with torch.no_grad():
        return model(
            hidden_states=hidden,
            timestep=torch.full((batch,), timestep),
            encoder_hidden_states=text,
            return_dict=False,
        )[0]


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """max |actual - expected| / max |expected|, in float64."""
    actual = actual.double()
    expected = expected.double()
    return float((actual - expected).abs().max() / expected.abs().max())
