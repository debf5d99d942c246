"""The video transformers new in diffusers 0.42, built tiny from their configs (random weights,
nothing downloaded): the served ones' builders and inputs (diffusers_models.CASES lists them)
and a builder for each refused one (test_diffusers_refused.py).

Sizes as in diffusers_models.py: 2 heads of dimension 16, 2 switched layers, a few latent
frames of a few tokens.
"""

from __future__ import annotations

import torch

HEADS = 2
HEAD_DIM = 16


def _g(seed):
    return torch.Generator().manual_seed(seed)


def _randn(generator, *shape):
    return torch.randn(*shape, generator=generator)


def randomize_zeros(model):
    # Kandinsky zero-initialises its output layers, which would hide attention entirely.
    with torch.no_grad():
        for parameter in model.parameters():
            if not parameter.any():
                parameter.normal_(0.0, 0.2)
    return model


# ---- served ----------------------------------------------------------------------------


def kandinsky6():
    from diffusers import Kandinsky6Transformer3DModel
    return randomize_zeros(Kandinsky6Transformer3DModel(
        in_visual_dim=4, out_visual_dim=4, in_text_dim=16, in_text_dim2=8, time_dim=16,
        patch_size=(1, 2, 2), model_dim=32, ff_dim=32, num_text_blocks=1, num_visual_blocks=2,
        axes_dims=(4, 6, 6), in_audio_dim=4, out_audio_dim=4))


def kandinsky6_inputs(batch, seed):
    g = _g(seed)
    # visual_cond: the noisy latent, the conditioning latent and its mask, 2 * 4 + 1 channels.
    return {"hidden_states": _randn(g, batch, 3, 8, 8, 9),
            "encoder_hidden_states": _randn(g, batch, 6, 16),
            "pooled_projections": _randn(g, batch, 8),
            "timestep": torch.full((batch,), 500.0)}


def kandinsky6_sr():
    from diffusers import Kandinsky6SRTransformer3DModel
    return randomize_zeros(Kandinsky6SRTransformer3DModel(
        in_visual_dim=4, out_visual_dim=4, time_dim=16, patch_size=(1, 1, 1), model_dim=32,
        ff_dim=32, num_visual_blocks=2, axes_dims=(4, 6, 6)))


def kandinsky6_sr_inputs(batch, seed):
    # 16 x 16 tokens a frame: four 8 x 8 NABLA tiles, so the tile order is not frame-major.
    # NABLA's sliding-tile prior (11, 7, 7) covers every tile of so small a grid: the native
    # model's attention is dense, which is what force="dense" is compared with.
    g = _g(seed)
    return {"hidden_states": _randn(g, batch, 2, 16, 16, 9),
            "timestep": torch.full((batch,), 500.0)}


def helios():
    from diffusers import HeliosTransformer3DModel
    return HeliosTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=HEADS, attention_head_dim=HEAD_DIM, in_channels=4,
        out_channels=4, text_dim=16, freq_dim=32, ffn_dim=32, num_layers=2, rope_dim=(4, 6, 6))


def helios_inputs(batch, seed, history=True):
    g = _g(seed)
    inputs = {"hidden_states": _randn(g, batch, 4, 3, 8, 8),
              "timestep": torch.full((batch,), 500.0),
              "encoder_hidden_states": _randn(g, batch, 6, 16),
              "indices_hidden_states": torch.arange(7, 10).expand(batch, -1)}
    if history:
        # short: 2 x 4 x 4 tokens; mid (padded to 2 x 8 x 8, stride 2 x 4 x 4): 1 x 2 x 2;
        # long (stride 4 x 8 x 8): 1 token. 37 history tokens before the video.
        inputs.update(
            latents_history_short=_randn(g, batch, 4, 2, 8, 8),
            indices_latents_history_short=torch.arange(5, 7).expand(batch, -1),
            latents_history_mid=_randn(g, batch, 4, 2, 8, 8),
            indices_latents_history_mid=torch.arange(3, 5).expand(batch, -1),
            latents_history_long=_randn(g, batch, 4, 4, 8, 8),
            indices_latents_history_long=torch.arange(0, 4).expand(batch, -1))
    return inputs


HELIOS_HISTORY = 2 * 4 * 4 + 1 * 2 * 2 + 1


def motif():
    from diffusers import MotifVideoTransformer3DModel
    # One decoder layer: left native (it attends [decoder tokens | encoded video]).
    return MotifVideoTransformer3DModel(
        in_channels=4, out_channels=4, num_attention_heads=HEADS, attention_head_dim=HEAD_DIM,
        num_layers=1, num_single_layers=2, num_decoder_layers=1, mlp_ratio=2.0, patch_size=2,
        patch_size_t=1, text_embed_dim=16, rope_axes_dim=(4, 6, 6))


def motif_inputs(batch, seed, lengths=None):
    g = _g(seed)
    mask = torch.ones(batch, 10)
    for b, n in enumerate(lengths or []):
        mask[b, n:] = 0
    return {"hidden_states": _randn(g, batch, 4, 3, 8, 8),
            "timestep": torch.full((batch,), 500.0),
            "encoder_hidden_states": _randn(g, batch, 10, 16),
            "encoder_attention_mask": mask}


def anyflow():
    from diffusers import AnyFlowTransformer3DModel
    return AnyFlowTransformer3DModel(
        patch_size=(1, 2, 2), num_attention_heads=HEADS, attention_head_dim=HEAD_DIM, in_channels=4,
        out_channels=4, text_dim=16, freq_dim=32, ffn_dim=32, num_layers=2, rope_max_seq_len=32)


def anyflow_inputs(batch, seed):
    g = _g(seed)
    # hidden_states [B, F, C, H, W]; the source and target timesteps are per frame.
    return {"hidden_states": _randn(g, batch, 3, 4, 8, 8),
            "timestep": torch.full((batch, 3), 500.0),
            "r_timestep": torch.full((batch, 3), 250.0),
            "encoder_hidden_states": _randn(g, batch, 6, 16)}


# ---- refused (built only: enable() refuses before any forward) ---------------------------


def wan_animate2():
    from diffusers import WanAnimate2Transformer3DModel
    return WanAnimate2Transformer3DModel(in_dim=4, dim=32, ffn_dim=32, freq_dim=32, text_dim=16,
                                         out_dim=4, num_heads=HEADS, num_layers=1, text_len=8)


def cosmos3_omni():
    from diffusers import Cosmos3OmniTransformer
    return Cosmos3OmniTransformer(head_dim=HEAD_DIM, hidden_size=32, intermediate_size=32,
                                  latent_channel=4, num_attention_heads=HEADS, num_hidden_layers=1,
                                  num_key_value_heads=1, patch_latent_dim=16, vocab_size=32,
                                  rope_axes_dim=(4, 2, 2))


def sana_wm():
    from diffusers import SanaWMTransformer3DModel
    return SanaWMTransformer3DModel(in_channels=4, num_layers=1, hidden_size=32,
                                    num_attention_heads=HEADS, linear_head_dim=16,
                                    chunk_plucker_post_attn_blocks=1, caption_channels=16)


def minimax_h3():
    from diffusers import MiniMaxH3Transformer3DModel
    return MiniMaxH3Transformer3DModel(
        num_attention_heads=HEADS, attention_head_dim=HEAD_DIM, hidden_size=32, num_layers=1,
        num_refiner_layers=1, ffn_dim=32, in_channels=4, audio_in_channels=4, text_dim=16,
        freq_dim=32, time_embed_hidden_dim=32, time_embed_dim=16, rope_freq_dim=2)


def anyflow_far():
    from diffusers import AnyFlowFARTransformer3DModel
    return AnyFlowFARTransformer3DModel(
        num_attention_heads=HEADS, attention_head_dim=HEAD_DIM, in_channels=4, out_channels=4,
        text_dim=16, freq_dim=32, ffn_dim=32, num_layers=1, rope_max_seq_len=32)


# name -> (builder, a word the refusal must give)
REFUSED = {
    "WanAnimate2Transformer3DModel": (wan_animate2, "BlockMask"),
    "Cosmos3OmniTransformer": (cosmos3_omni, "grouped-query"),
    "SanaWMTransformer3DModel": (sana_wm, "linear attention"),
    "MiniMaxH3Transformer3DModel": (minimax_h3, "position_ids"),
    "AnyFlowFARTransformer3DModel": (anyflow_far, "causal"),
}
