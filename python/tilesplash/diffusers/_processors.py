"""Self-attention processors that run diffusers' video models through tilesplash.

Each processor is a line-for-line copy of the diffusers 0.42 processor it
replaces (projections, q/k norms, RoPE exactly where diffusers applies them,
output projection) with one change: the attention call goes to
``Runtime.attend``. That is why ``force="dense"`` reproduces the native output
up to the summation order of the attention kernel.

A ``ModelKind`` says, for one transformer class, which attention modules to
swap, which processor they must hold, and how the input's shape gives the
latent video's frames, height and width after patching.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ._runtime import Runtime


def _wan_rotary(hidden_states: torch.Tensor, freqs_cos: torch.Tensor, freqs_sin: torch.Tensor) -> torch.Tensor:
    # diffusers 0.42 WanAttnProcessor's apply_rotary_emb, unchanged.
    x1, x2 = hidden_states.unflatten(-1, (-1, 2)).unbind(-1)
    cos = freqs_cos[..., 0::2]
    sin = freqs_sin[..., 1::2]
    out = torch.empty_like(hidden_states)
    out[..., 0::2] = x1 * cos - x2 * sin
    out[..., 1::2] = x1 * sin + x2 * cos
    return out.type_as(hidden_states)


class _Processor:
    # diffusers' set_attention_backend / enable_parallelism set these on every
    # processor; tilesplash ignores them.
    _attention_backend = None
    _parallel_config = None

    def __init__(self, runtime: Runtime, layer: int, name: str) -> None:
        self.runtime = runtime
        self.layer = layer
        self.name = name  # the module's path in the transformer, for the report

    def __repr__(self) -> str:
        return f"{type(self).__name__}(layer={self.layer}, module={self.name!r})"


class WanTilesplashProcessor(_Processor):
    """``WanAttnProcessor`` for ``attn1`` (self-attention) with tilesplash attention."""

    def __call__(
        self,
        attn,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        rotary_emb: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        if encoder_hidden_states is not None:
            raise ValueError("tilesplash: WanTilesplashProcessor serves self-attention: encoder_hidden_states must be None")
        if attention_mask is not None:
            raise ValueError("tilesplash: WanTilesplashProcessor takes no attention_mask (Wan's self-attention has none)")

        if getattr(attn, "fused_projections", False):
            query, key, value = attn.to_qkv(hidden_states).chunk(3, dim=-1)
        else:
            query = attn.to_q(hidden_states)
            key = attn.to_k(hidden_states)
            value = attn.to_v(hidden_states)

        query = attn.norm_q(query)
        key = attn.norm_k(key)

        query = query.unflatten(2, (attn.heads, -1))
        key = key.unflatten(2, (attn.heads, -1))
        value = value.unflatten(2, (attn.heads, -1))

        if rotary_emb is not None:
            query = _wan_rotary(query, *rotary_emb)
            key = _wan_rotary(key, *rotary_emb)

        hidden_states = self.runtime.attend(query, key, value, layer=self.layer, module=self.name, layout="bnhd")
        hidden_states = hidden_states.flatten(2, 3)
        hidden_states = hidden_states.type_as(query)

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)
        return hidden_states


class CogVideoXTilesplashProcessor(_Processor):
    """``CogVideoXAttnProcessor2_0`` (joint text + video attention) with tilesplash attention.

    The text tokens come first (CogVideoX puts its prompt, 226 tokens, before
    the video) and attend, and are attended by, everything (``text_full``);
    video tokens are routed spatial or temporal.
    """

    def __call__(
        self,
        attn,
        hidden_states: torch.Tensor,
        encoder_hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        image_rotary_emb: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if attention_mask is not None:
            raise ValueError("tilesplash: CogVideoXTilesplashProcessor takes no attention_mask (CogVideoX passes none)")
        text_seq_length = encoder_hidden_states.size(1)

        hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)

        batch_size, sequence_length, _ = hidden_states.shape

        query = attn.to_q(hidden_states)
        key = attn.to_k(hidden_states)
        value = attn.to_v(hidden_states)

        inner_dim = key.shape[-1]
        head_dim = inner_dim // attn.heads

        query = query.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        key = key.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)

        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)

        if image_rotary_emb is not None:
            from diffusers.models.embeddings import apply_rotary_emb

            query[:, :, text_seq_length:] = apply_rotary_emb(query[:, :, text_seq_length:], image_rotary_emb)
            if not attn.is_cross_attention:
                key[:, :, text_seq_length:] = apply_rotary_emb(key[:, :, text_seq_length:], image_rotary_emb)

        hidden_states = self.runtime.attend(
            query, key, value, layer=self.layer, module=self.name, layout="bhnd", text=text_seq_length, text_at="before"
        )

        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)

        encoder_hidden_states, hidden_states = hidden_states.split(
            [text_seq_length, hidden_states.size(1) - text_seq_length], dim=1
        )
        return hidden_states, encoder_hidden_states


@dataclass(frozen=True)
class ModelKind:
    """How tilesplash plugs into one family of diffusers transformers."""

    name: str
    model_class: type
    native_processor: type  # the exact processor class the swapped modules must hold
    processor: type
    # (layer, name, module) of every self-attention module to swap, in call order
    attention_modules: Callable[[torch.nn.Module], list[tuple[int, str, torch.nn.Module]]]
    video_shape: Callable[[torch.nn.Module, torch.Tensor], tuple[int, int, int]]


def _wan_video_shape(model, hidden_states: torch.Tensor) -> tuple[int, int, int]:
    # hidden_states [B, C, F, H, W]; Conv3d patching with stride = patch size.
    _, _, frames, height, width = hidden_states.shape
    p_t, p_h, p_w = model.config.patch_size
    return frames // p_t, height // p_h, width // p_w


def _cogvideox_video_shape(model, hidden_states: torch.Tensor) -> tuple[int, int, int]:
    # hidden_states [B, F, C, H, W]; CogVideoX 1.0 patches frames one by one (patch_size_t None).
    _, frames, _, height, width = hidden_states.shape
    p = model.config.patch_size
    p_t = model.config.patch_size_t or 1
    return frames // p_t, height // p, width // p


def _self_attention(model, blocks: str) -> list[tuple[int, str, torch.nn.Module]]:
    return [(i, f"{blocks}.{i}.attn1", block.attn1) for i, block in enumerate(getattr(model, blocks))]


def _wan_vace_self_attention(model) -> list[tuple[int, str, torch.nn.Module]]:
    # The control branch's blocks run first, each feeding the main block
    # config.vace_layers[i]: that block's depth is its layer (for dense_layers).
    vace = [
        (model.config.vace_layers[i], f"vace_blocks.{i}.attn1", block.attn1)
        for i, block in enumerate(model.vace_blocks)
    ]
    return vace + _self_attention(model, "blocks")


def model_kinds() -> list[ModelKind]:
    """The supported transformers; imports diffusers."""
    from diffusers import CogVideoXTransformer3DModel, WanTransformer3DModel, WanVACETransformer3DModel
    from diffusers.models.attention_processor import CogVideoXAttnProcessor2_0
    from diffusers.models.transformers.transformer_wan import WanAttnProcessor

    return [
        ModelKind(
            name="WanTransformer3DModel",
            model_class=WanTransformer3DModel,
            native_processor=WanAttnProcessor,
            processor=WanTilesplashProcessor,
            attention_modules=lambda model: _self_attention(model, "blocks"),
            video_shape=_wan_video_shape,
        ),
        ModelKind(
            name="WanVACETransformer3DModel",
            model_class=WanVACETransformer3DModel,
            native_processor=WanAttnProcessor,
            processor=WanTilesplashProcessor,
            attention_modules=_wan_vace_self_attention,
            video_shape=_wan_video_shape,
        ),
        ModelKind(
            name="CogVideoXTransformer3DModel",
            model_class=CogVideoXTransformer3DModel,
            native_processor=CogVideoXAttnProcessor2_0,
            processor=CogVideoXTilesplashProcessor,
            attention_modules=lambda model: _self_attention(model, "transformer_blocks"),
            video_shape=_cogvideox_video_shape,
        ),
    ]
