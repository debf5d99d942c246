"""Copies of the processors that do not reach diffusers' attention dispatcher.

CogVideoX (and ConsisID), Mochi, Allegro and EasyAnimate call
``F.scaled_dot_product_attention`` directly, Cosmos calls
``dispatch_attention_fn`` without its processor's backend and Kandinsky 6 SR
with the flex backend named, so naming a backend cannot reach them. Each class here is diffusers 0.42.1's processor
line for line (projections, q/k norms, RoPE exactly where diffusers applies
it, output projections) with one change: the attention call goes to the
tilesplash backend function (``_dispatch.attention``, diffusers' [B, S, H, D]
layout), as the dispatcher would. That is why ``force="dense"`` reproduces
the native output up to the summation order of the attention kernel.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._dispatch import attention


class _Processor:
    # diffusers' set_attention_backend / enable_parallelism set these on every processor;
    # the copies ignore them (tilesplash is their backend).
    _attention_backend = None
    _parallel_config = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _bhnd_attention(query, key, value, attn_mask=None):
    """attention() on [B, H, S, D] tensors, returned as [B, H, S, Dv] (a view)."""
    out = attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                    attn_mask=attn_mask)
    return out.transpose(1, 2)


class CogVideoXTilesplashProcessor(_Processor):
    """``CogVideoXAttnProcessor2_0``: joint attention, the text before the video."""

    def __call__(self, attn, hidden_states, encoder_hidden_states, attention_mask=None,
                 image_rotary_emb=None):
        text_seq_length = encoder_hidden_states.size(1)

        hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)

        batch_size, sequence_length, _ = hidden_states.shape

        if attention_mask is not None:
            attention_mask = attn.prepare_attention_mask(attention_mask, sequence_length, batch_size)
            attention_mask = attention_mask.view(batch_size, attn.heads, -1, attention_mask.shape[-1])

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

        hidden_states = _bhnd_attention(query, key, value, attention_mask)

        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)

        encoder_hidden_states, hidden_states = hidden_states.split(
            [text_seq_length, hidden_states.size(1) - text_seq_length], dim=1
        )
        return hidden_states, encoder_hidden_states


class MochiTilesplashProcessor(_Processor):
    """``MochiAttnProcessor2_0``: joint attention, the prompt's real tokens after the video.

    Mochi runs each batch entry on its video and real prompt tokens and pads
    the output with zeros; here the whole batch runs at once with the padding as
    key padding, and the padded rows are zeroed the same way.
    """

    def __call__(self, attn, hidden_states, encoder_hidden_states, attention_mask,
                 image_rotary_emb=None):
        query = attn.to_q(hidden_states)
        key = attn.to_k(hidden_states)
        value = attn.to_v(hidden_states)

        query = query.unflatten(2, (attn.heads, -1))
        key = key.unflatten(2, (attn.heads, -1))
        value = value.unflatten(2, (attn.heads, -1))

        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)

        encoder_query = attn.add_q_proj(encoder_hidden_states)
        encoder_key = attn.add_k_proj(encoder_hidden_states)
        encoder_value = attn.add_v_proj(encoder_hidden_states)

        encoder_query = encoder_query.unflatten(2, (attn.heads, -1))
        encoder_key = encoder_key.unflatten(2, (attn.heads, -1))
        encoder_value = encoder_value.unflatten(2, (attn.heads, -1))

        if attn.norm_added_q is not None:
            encoder_query = attn.norm_added_q(encoder_query)
        if attn.norm_added_k is not None:
            encoder_key = attn.norm_added_k(encoder_key)

        if image_rotary_emb is not None:

            def apply_rotary_emb(x, freqs_cos, freqs_sin):
                x_even = x[..., 0::2].float()
                x_odd = x[..., 1::2].float()

                cos = (x_even * freqs_cos - x_odd * freqs_sin).to(x.dtype)
                sin = (x_even * freqs_sin + x_odd * freqs_cos).to(x.dtype)

                return torch.stack([cos, sin], dim=-1).flatten(-2)

            query = apply_rotary_emb(query, *image_rotary_emb)
            key = apply_rotary_emb(key, *image_rotary_emb)

        sequence_length = query.size(1)
        encoder_sequence_length = encoder_query.size(1)

        real = torch.cat([attention_mask.new_ones(attention_mask.shape[0], sequence_length),
                          attention_mask], dim=1).bool()  # [B, video + text]: the real tokens
        hidden_states = attention(torch.cat([query, encoder_query], dim=1),
                                  torch.cat([key, encoder_key], dim=1),
                                  torch.cat([value, encoder_value], dim=1), attn_mask=real)
        hidden_states = hidden_states * real[:, :, None, None].to(hidden_states.dtype)
        hidden_states = hidden_states.flatten(2, 3)

        hidden_states, encoder_hidden_states = hidden_states.split_with_sizes(
            (sequence_length, encoder_sequence_length), dim=1
        )

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)

        if hasattr(attn, "to_add_out"):
            encoder_hidden_states = attn.to_add_out(encoder_hidden_states)

        return hidden_states, encoder_hidden_states


class CosmosTilesplashProcessor(_Processor):
    """``CosmosAttnProcessor2_0`` (self-attention, no text); diffusers' calls the
    dispatcher without its backend, so it cannot be switched by name."""

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None,
                 image_rotary_emb=None):
        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states

        query = attn.to_q(hidden_states)
        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)

        query = query.unflatten(2, (attn.heads, -1)).transpose(1, 2)
        key = key.unflatten(2, (attn.heads, -1)).transpose(1, 2)
        value = value.unflatten(2, (attn.heads, -1)).transpose(1, 2)

        query = attn.norm_q(query)
        key = attn.norm_k(key)

        if image_rotary_emb is not None:
            from diffusers.models.embeddings import apply_rotary_emb

            query = apply_rotary_emb(query, image_rotary_emb, use_real=True, use_real_unbind_dim=-2)
            key = apply_rotary_emb(key, image_rotary_emb, use_real=True, use_real_unbind_dim=-2)

        query_idx = query.size(3)
        key_idx = key.size(3)
        value_idx = value.size(3)
        key = key.repeat_interleave(query_idx // key_idx, dim=3)
        value = value.repeat_interleave(query_idx // value_idx, dim=3)

        hidden_states = attention(query.transpose(1, 2), key.transpose(1, 2), value.transpose(1, 2),
                                  attn_mask=attention_mask)
        hidden_states = hidden_states.flatten(2, 3).type_as(query)
        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)

        return hidden_states


class AllegroTilesplashProcessor(_Processor):
    """``AllegroAttnProcessor2_0`` for ``attn1`` (self-attention over the video)."""

    def __call__(self, attn, hidden_states, encoder_hidden_states=None, attention_mask=None,
                 temb=None, image_rotary_emb=None):
        residual = hidden_states

        if attn.spatial_norm is not None:
            hidden_states = attn.spatial_norm(hidden_states, temb)

        input_ndim = hidden_states.ndim

        if input_ndim == 4:
            batch_size, channel, height, width = hidden_states.shape
            hidden_states = hidden_states.view(batch_size, channel, height * width).transpose(1, 2)

        batch_size, sequence_length, _ = (
            hidden_states.shape if encoder_hidden_states is None else encoder_hidden_states.shape
        )

        if attention_mask is not None:
            attention_mask = attn.prepare_attention_mask(attention_mask, sequence_length, batch_size)
            attention_mask = attention_mask.view(batch_size, attn.heads, -1, attention_mask.shape[-1])

        if attn.group_norm is not None:
            hidden_states = attn.group_norm(hidden_states.transpose(1, 2)).transpose(1, 2)

        query = attn.to_q(hidden_states)

        if encoder_hidden_states is None:
            encoder_hidden_states = hidden_states
        elif attn.norm_cross:
            encoder_hidden_states = attn.norm_encoder_hidden_states(encoder_hidden_states)

        key = attn.to_k(encoder_hidden_states)
        value = attn.to_v(encoder_hidden_states)

        inner_dim = key.shape[-1]
        head_dim = inner_dim // attn.heads

        query = query.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        key = key.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)
        value = value.view(batch_size, -1, attn.heads, head_dim).transpose(1, 2)

        if image_rotary_emb is not None and not attn.is_cross_attention:
            from diffusers.models.embeddings import apply_rotary_emb_allegro

            query = apply_rotary_emb_allegro(query, image_rotary_emb[0], image_rotary_emb[1])
            key = apply_rotary_emb_allegro(key, image_rotary_emb[0], image_rotary_emb[1])

        hidden_states = _bhnd_attention(query, key, value, attention_mask)

        hidden_states = hidden_states.transpose(1, 2).reshape(batch_size, -1, attn.heads * head_dim)
        hidden_states = hidden_states.to(query.dtype)

        hidden_states = attn.to_out[0](hidden_states)
        hidden_states = attn.to_out[1](hidden_states)

        if input_ndim == 4:
            hidden_states = hidden_states.transpose(-1, -2).reshape(batch_size, channel, height, width)

        if attn.residual_connection:
            hidden_states = hidden_states + residual

        hidden_states = hidden_states / attn.rescale_output_factor

        return hidden_states


class EasyAnimateTilesplashProcessor(_Processor):
    """``EasyAnimateAttnProcessor2_0``: joint attention, the text before the video."""

    def __call__(self, attn, hidden_states, encoder_hidden_states, attention_mask=None,
                 image_rotary_emb=None):
        if attn.add_q_proj is None and encoder_hidden_states is not None:
            hidden_states = torch.cat([encoder_hidden_states, hidden_states], dim=1)

        query = attn.to_q(hidden_states)
        key = attn.to_k(hidden_states)
        value = attn.to_v(hidden_states)

        query = query.unflatten(2, (attn.heads, -1)).transpose(1, 2)
        key = key.unflatten(2, (attn.heads, -1)).transpose(1, 2)
        value = value.unflatten(2, (attn.heads, -1)).transpose(1, 2)

        if attn.norm_q is not None:
            query = attn.norm_q(query)
        if attn.norm_k is not None:
            key = attn.norm_k(key)

        if attn.add_q_proj is not None and encoder_hidden_states is not None:
            encoder_query = attn.add_q_proj(encoder_hidden_states)
            encoder_key = attn.add_k_proj(encoder_hidden_states)
            encoder_value = attn.add_v_proj(encoder_hidden_states)

            encoder_query = encoder_query.unflatten(2, (attn.heads, -1)).transpose(1, 2)
            encoder_key = encoder_key.unflatten(2, (attn.heads, -1)).transpose(1, 2)
            encoder_value = encoder_value.unflatten(2, (attn.heads, -1)).transpose(1, 2)

            if attn.norm_added_q is not None:
                encoder_query = attn.norm_added_q(encoder_query)
            if attn.norm_added_k is not None:
                encoder_key = attn.norm_added_k(encoder_key)

            query = torch.cat([encoder_query, query], dim=2)
            key = torch.cat([encoder_key, key], dim=2)
            value = torch.cat([encoder_value, value], dim=2)

        if image_rotary_emb is not None:
            from diffusers.models.embeddings import apply_rotary_emb

            query[:, :, encoder_hidden_states.shape[1] :] = apply_rotary_emb(
                query[:, :, encoder_hidden_states.shape[1] :], image_rotary_emb
            )
            if not attn.is_cross_attention:
                key[:, :, encoder_hidden_states.shape[1] :] = apply_rotary_emb(
                    key[:, :, encoder_hidden_states.shape[1] :], image_rotary_emb
                )

        hidden_states = _bhnd_attention(query, key, value, attention_mask)
        hidden_states = hidden_states.transpose(1, 2).flatten(2, 3)
        hidden_states = hidden_states.to(query.dtype)

        if encoder_hidden_states is not None:
            encoder_hidden_states, hidden_states = (
                hidden_states[:, : encoder_hidden_states.shape[1]],
                hidden_states[:, encoder_hidden_states.shape[1] :],
            )

            if getattr(attn, "to_out", None) is not None:
                hidden_states = attn.to_out[0](hidden_states)
                hidden_states = attn.to_out[1](hidden_states)

            if getattr(attn, "to_add_out", None) is not None:
                encoder_hidden_states = attn.to_add_out(encoder_hidden_states)
        else:
            if getattr(attn, "to_out", None) is not None:
                hidden_states = attn.to_out[0](hidden_states)
                hidden_states = attn.to_out[1](hidden_states)

        return hidden_states, encoder_hidden_states


class Kandinsky6SRTilesplashProcessor(_Processor):
    """``Kandinsky6SRAttnProcessor``: diffusers' builds NABLA's BlockMask from the queries
    and keys and asks for the flex backend by name. tilesplash replaces NABLA (as it does
    Kandinsky 5's): the mask is not built, and the 8 x 8 tile order is undone in
    ``_dispatch.attention`` (the spec's token order)."""

    def __call__(self, attn, hidden_states, rotary_emb, sparse_params):
        from diffusers.models.transformers.transformer_kandinsky6_sr import apply_rotary

        query = attn.to_query(hidden_states).unflatten(-1, (attn.num_heads, -1))
        key = attn.to_key(hidden_states).unflatten(-1, (attn.num_heads, -1))
        value = attn.to_value(hidden_states).unflatten(-1, (attn.num_heads, -1))
        query = attn.query_norm(query.float()).type_as(query)
        key = attn.key_norm(key.float()).type_as(key)
        query = apply_rotary(query, rotary_emb)
        key = apply_rotary(key, rotary_emb)

        hidden_states = attention(query, key, value)
        return attn.out_layer(hidden_states.flatten(2, 3))


COPIES = {cls.__name__: cls for cls in (CogVideoXTilesplashProcessor, MochiTilesplashProcessor,
                                        CosmosTilesplashProcessor, AllegroTilesplashProcessor,
                                        EasyAnimateTilesplashProcessor,
                                        Kandinsky6SRTilesplashProcessor)}
