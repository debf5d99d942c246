"""The per-model table: how tilesplash reads each diffusers video transformer.

One ``ModelSpec`` per transformer class says which attention modules run
self-attention over the video tokens (and their layer), which processor
classes they may hold, how the forward's inputs give the latent video's
frames, height and width after patching, where the text sits in the joint
sequence, how an attention mask reads as key padding, and the token order
when it is not frame-major. Adding a model is one entry here (and a test);
the mechanism (``_dispatch``) is shared. A spec with a ``refusal`` names a
model that cannot be served and why.

Geometry functions run inside the transformer's forward pre-hook, also under
torch.compile: they read shapes and config values only (plain ints).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class TokenOrder:
    """Where a model's self-attention tokens are not frame-major video then text.

    kind "history": ``prefix`` tokens (FramePack's clean and downsampled history)
    precede the video; they move after it and join the text.
    kind "tiles": the video is ordered by ``tile`` x ``tile`` spatial tiles per frame
    (Kandinsky 5's NABLA order, ``local_patching``); it moves to frame-major.
    """

    kind: str
    prefix: int = 0
    tile: int = 0


@dataclass(frozen=True)
class Forward:
    """What the transformer's pre-hook reads from one forward call."""

    video: tuple[int, int, int]  # latent frames, height, width after patching
    timestep: torch.Tensor
    order: TokenOrder | None = None


@dataclass(frozen=True)
class ModelSpec:
    name: str  # the diffusers class
    # (layer, path, module) of every self-attention module to switch
    modules: Callable[[torch.nn.Module], list[tuple[int, str, torch.nn.Module]]]
    processors: tuple[str, ...]  # the processor classes (by name) those modules may hold
    inputs: tuple[str, ...]  # forward arguments the geometry reads
    video: Callable[[torch.nn.Module, dict], tuple[int, int, int]]
    text_at: str = "none"  # "none", "before" or "after" the video in the joint sequence
    copy: str | None = None  # a tilesplash copy of the processor (it bypasses the dispatcher)
    mask: str = "keys"  # attn_mask is key padding broadcast over queries, or "outer": keys & queries
    order: Callable[[torch.nn.Module, dict], TokenOrder | None] | None = None
    sink: bool = False  # the default of enable(sink=None): Wan's first-frame sink
    full_mask: str = ""  # why a [.., S, S] attention mask of this model cannot be served
    refusal: str | None = None  # NotImplementedError: why this model cannot be served
    # enable(process_group=): tilesplash's own sequence parallel, through hooks on the
    # transformer's "rope", "patch_embedding" and "proj_out" (_sequence_parallel: a Conv3d
    # patch embedding, rotary tables [1, N, 1, d], the output projection per token), or None:
    # refused (a model with diffusers' _cp_plan is pointed at diffusers' context parallelism).
    sequence: str | None = None

    def forward(self, model, inputs: dict) -> Forward:
        order = self.order(model, inputs) if self.order is not None else None
        return Forward(self.video(model, inputs), inputs["timestep"], order)


# ---- geometry from the input ----------------------------------------------------------


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _cfhw(model, inputs) -> tuple[int, int, int]:
    # hidden_states [B, C, F, H, W]; Conv3d patching with stride = the tuple patch_size.
    _, _, frames, height, width = inputs["hidden_states"].shape
    p_t, p_h, p_w = model.config.patch_size
    return frames // p_t, height // p_h, width // p_w


def _cfhw_split(model, inputs) -> tuple[int, int, int]:
    # hidden_states [B, C, F, H, W]; patch_size (spatial int) and patch_size_t (None: 1).
    _, _, frames, height, width = inputs["hidden_states"].shape
    p = model.config.patch_size
    p_t = getattr(model.config, "patch_size_t", None) or 1
    return frames // p_t, height // p, width // p


def _fchw(model, inputs) -> tuple[int, int, int]:
    # CogVideoX: hidden_states [B, F, C, H, W]; CogVideoX 1.0 patches frames one by one.
    _, frames, _, height, width = inputs["hidden_states"].shape
    p = model.config.patch_size
    p_t = getattr(model.config, "patch_size_t", None) or 1  # ConsisID has none
    return frames // p_t, height // p, width // p


def _fchw3(model, inputs) -> tuple[int, int, int]:
    # AnyFlow: hidden_states [B, F, C, H, W], permuted to [B, C, F, H, W] for a Conv3d whose
    # stride is the tuple patch_size.
    _, frames, _, height, width = inputs["hidden_states"].shape
    p_t, p_h, p_w = model.config.patch_size
    return frames // p_t, height // p_h, width // p_w


def _fhwc(model, inputs) -> tuple[int, int, int]:
    # Kandinsky 5 and 6: hidden_states [B, F, H, W, C], a linear patch embedding.
    _, frames, height, width, _ = inputs["hidden_states"].shape
    p_t, p_h, p_w = model.config.patch_size
    return frames // p_t, height // p_h, width // p_w


def _packed(model, inputs) -> tuple[int, int, int]:
    # LTX-Video: packed hidden_states [B, N, C]; the latent grid comes as arguments.
    if inputs["num_frames"] is None or inputs["height"] is None or inputs["width"] is None:
        raise NotImplementedError(
            f"tilesplash: {type(model).__name__} was called without num_frames, height and width "
            "(with video_coords only, as LTXConditionPipeline does for its conditioning tokens): "
            "its tokens then follow no frames x height x width grid")
    p, p_t = model.config.patch_size, model.config.patch_size_t
    return (_ceil(inputs["num_frames"], p_t), _ceil(inputs["height"], p),
            _ceil(inputs["width"], p))


# ---- token orders ----------------------------------------------------------------------


def _framepack_history(model, inputs) -> TokenOrder | None:
    # _pack_history_states puts the 4x, 2x and clean history tokens before the video; each is
    # counted only with its frame indices, as the model counts it.
    _, _, _, height, width = inputs["hidden_states"].shape
    tokens = 0
    for name, (kt, kh, kw) in (("latents_clean", (1, 2, 2)), ("latents_history_2x", (2, 4, 4)),
                               ("latents_history_4x", (4, 8, 8))):
        latents = inputs[name]
        indices = inputs["indices_" + name]
        if latents is None or indices is None:
            continue
        _, _, t, h, w = latents.shape
        if kt == 1:  # the clean latents are patched like the video, without padding
            tokens += t * (h // kh) * (w // kw)
        else:  # replicate-padded to the kernel, then strided
            tokens += _ceil(t, kt) * _ceil(h, kh) * _ceil(w, kw)
    return TokenOrder("history", prefix=tokens) if tokens else None


def _helios_history(model, inputs) -> TokenOrder | None:
    # Helios puts its long, mid and short history tokens before the video (each pass prepends,
    # so the last added comes first); each is counted only with its frame indices, as the model
    # counts it. Mid and long are replicate-padded to (2, 4, 4) and (4, 8, 8), then strided by
    # two and four times the patch.
    p_t, p_h, p_w = model.config.patch_size
    tokens = 0
    for name, pad, times in (("latents_history_short", (1, 1, 1), 1),
                             ("latents_history_mid", (2, 4, 4), 2),
                             ("latents_history_long", (4, 8, 8), 4)):
        latents = inputs[name]
        if latents is None or inputs["indices_" + name] is None:
            continue
        _, _, t, h, w = latents.shape
        t, h, w = (_ceil(n, k) * k for n, k in zip((t, h, w), pad))
        tokens += (t // (times * p_t)) * (h // (times * p_h)) * (w // (times * p_w))
    return TokenOrder("history", prefix=tokens) if tokens else None


def _kandinsky_tiles(model, inputs) -> TokenOrder | None:
    sparse = inputs["sparse_params"]
    if sparse is not None and sparse.get("to_fractal", False):
        return TokenOrder("tiles", tile=8)
    return None


def _nabla_tiles(model, inputs) -> TokenOrder | None:
    # Kandinsky 6 SR always runs NABLA: its tokens always come in 8 x 8 spatial tiles per frame.
    return TokenOrder("tiles", tile=8)


# ---- attention modules -----------------------------------------------------------------


def _attribute(module, path: str):
    for name in path.split("."):
        module = getattr(module, name)
    return module


def _blocks(*groups: tuple[str, str]):
    """Every `attention` (a dotted path inside the block) of every block of each `blocks` list,
    layers numbered on in call order."""

    def modules(model):
        found, layer = [], 0
        for blocks, attention in groups:
            for i, block in enumerate(getattr(model, blocks)):
                found.append((layer, f"{blocks}.{i}.{attention}", _attribute(block, attention)))
                layer += 1
        return found

    return modules


def _motif(model):
    # The last num_decoder_layers single-stream blocks attend [decoder tokens | the encoded video]
    # (twice the video, no text): they are left as they are; the encoder's blocks are switched.
    found = _blocks(("transformer_blocks", "attn"), ("single_transformer_blocks", "attn"))(model)
    return found[:len(found) - model.config.num_decoder_layers]


def _wan_vace(model):
    # The control branch's blocks run first, each feeding main block config.vace_layers[i]:
    # that block's depth is its layer (so dense_layers=1 keeps both layer-0 attentions dense).
    vace = [(model.config.vace_layers[i], f"vace_blocks.{i}.attn1", block.attn1)
            for i, block in enumerate(model.vace_blocks)]
    return vace + _blocks(("blocks", "attn1"))(model)


_WAN_INPUTS = ("hidden_states", "timestep")
_HUNYUAN_BLOCKS = _blocks(("transformer_blocks", "attn"), ("single_transformer_blocks", "attn"))
_SKYREELS_FULL_MASK = (
    "SkyReels-V2 diffusion forcing with num_frame_per_block > 1 (the pipelines' causal_block_size, "
    "autoregressive mode) passes a block-causal [N, N] mask, which tilesplash's masks do not "
    "compose with; the default (num_frame_per_block=1) passes none")


def model_specs() -> list[ModelSpec]:
    """Every diffusers video transformer tilesplash knows, served or refused."""
    return [
        ModelSpec("WanTransformer3DModel", _blocks(("blocks", "attn1")), ("WanAttnProcessor",),
                  _WAN_INPUTS, _cfhw, sink=True, sequence="rope_patch_proj"),
        ModelSpec("WanVACETransformer3DModel", _wan_vace, ("WanAttnProcessor",), _WAN_INPUTS,
                  _cfhw, sink=True),
        ModelSpec("WanAnimateTransformer3DModel", _blocks(("blocks", "attn1")),
                  ("WanAttnProcessor",), _WAN_INPUTS, _cfhw, sink=True),
        ModelSpec("ChronoEditTransformer3DModel", _blocks(("blocks", "attn1")),
                  ("WanAttnProcessor",), _WAN_INPUTS, _cfhw, sink=True),
        ModelSpec("SkyReelsV2Transformer3DModel", _blocks(("blocks", "attn1")),
                  ("SkyReelsV2AttnProcessor",), _WAN_INPUTS, _cfhw, sink=True,
                  full_mask=_SKYREELS_FULL_MASK),
        ModelSpec("HunyuanVideoTransformer3DModel", _HUNYUAN_BLOCKS,
                  ("HunyuanVideoAttnProcessor2_0",), _WAN_INPUTS, _cfhw_split, text_at="after"),
        ModelSpec("HunyuanVideo15Transformer3DModel", _blocks(("transformer_blocks", "attn")),
                  ("HunyuanVideo15AttnProcessor2_0",), _WAN_INPUTS, _cfhw_split,
                  text_at="after", mask="outer"),
        ModelSpec("HunyuanVideoFramepackTransformer3DModel", _HUNYUAN_BLOCKS,
                  ("HunyuanVideoAttnProcessor2_0",),
                  _WAN_INPUTS + ("latents_clean", "indices_latents_clean", "latents_history_2x",
                                 "indices_latents_history_2x", "latents_history_4x",
                                 "indices_latents_history_4x"),
                  _cfhw_split, text_at="after", order=_framepack_history),
        ModelSpec("LTXVideoTransformer3DModel", _blocks(("transformer_blocks", "attn1")),
                  ("LTXVideoAttnProcessor",), ("hidden_states", "timestep", "num_frames", "height",
                                               "width"), _packed),
        ModelSpec("LTX2VideoTransformer3DModel", _blocks(("transformer_blocks", "attn1")),
                  ("LTX2AudioVideoAttnProcessor", "LTX2PerturbedAttnProcessor"),
                  ("hidden_states", "timestep", "num_frames", "height", "width"), _packed,
                  full_mask="LTX-2's video_self_attention_mask (an [N, N] bias between video "
                            "tokens) does not compose with tilesplash's masks; call without it"),
        ModelSpec("CogVideoXTransformer3DModel", _blocks(("transformer_blocks", "attn1")),
                  ("CogVideoXAttnProcessor2_0",), _WAN_INPUTS, _fchw, text_at="before",
                  copy="CogVideoXTilesplashProcessor"),
        ModelSpec("ConsisIDTransformer3DModel", _blocks(("transformer_blocks", "attn1")),
                  ("CogVideoXAttnProcessor2_0",), _WAN_INPUTS, _fchw, text_at="before",
                  copy="CogVideoXTilesplashProcessor"),
        ModelSpec("MochiTransformer3DModel", _blocks(("transformer_blocks", "attn1")),
                  ("MochiAttnProcessor2_0",), _WAN_INPUTS, _cfhw_split, text_at="after",
                  copy="MochiTilesplashProcessor"),
        ModelSpec("CosmosTransformer3DModel", _blocks(("transformer_blocks", "attn1")),
                  ("CosmosAttnProcessor2_0",), _WAN_INPUTS, _cfhw,
                  copy="CosmosTilesplashProcessor"),
        ModelSpec("AllegroTransformer3DModel", _blocks(("transformer_blocks", "attn1")),
                  ("AllegroAttnProcessor2_0",), _WAN_INPUTS, _cfhw_split,
                  copy="AllegroTilesplashProcessor"),
        ModelSpec("EasyAnimateTransformer3DModel", _blocks(("transformer_blocks", "attn1")),
                  ("EasyAnimateAttnProcessor2_0",), _WAN_INPUTS, _cfhw_split, text_at="before",
                  copy="EasyAnimateTilesplashProcessor"),
        ModelSpec("Kandinsky5Transformer3DModel",
                  _blocks(("visual_transformer_blocks", "self_attention")),
                  ("Kandinsky5AttnProcessor",), ("hidden_states", "timestep", "sparse_params"),
                  _fhwc, order=_kandinsky_tiles),
        ModelSpec("Kandinsky6Transformer3DModel",
                  _blocks(("visual_transformer_blocks", "video_dec_block.self_attention")),
                  ("Kandinsky6AttnProcessor",), _WAN_INPUTS, _fhwc),
        ModelSpec("Kandinsky6SRTransformer3DModel",
                  _blocks(("visual_transformer_blocks", "self_attention")),
                  ("Kandinsky6SRAttnProcessor",), _WAN_INPUTS, _fhwc, order=_nabla_tiles,
                  copy="Kandinsky6SRTilesplashProcessor"),
        ModelSpec("HeliosTransformer3DModel", _blocks(("blocks", "attn1")), ("HeliosAttnProcessor",),
                  _WAN_INPUTS + tuple(f"{kind}latents_history_{age}" for age in ("short", "mid", "long")
                                      for kind in ("", "indices_")),
                  _cfhw, order=_helios_history),
        ModelSpec("MotifVideoTransformer3DModel", _motif, ("MotifVideoAttnProcessor2_0",),
                  _WAN_INPUTS, _cfhw_split, text_at="after"),
        ModelSpec("AnyFlowTransformer3DModel", _blocks(("blocks", "attn1")), ("AnyFlowAttnProcessor",),
                  _WAN_INPUTS, _fchw3, sink=True),
        ModelSpec("SanaVideoTransformer3DModel", _blocks(("transformer_blocks", "attn1")), (),
                  _WAN_INPUTS, _cfhw,
                  refusal="its self-attention (SanaLinearAttnProcessor3_0) is linear attention "
                          "(ReLU feature maps, O(N) in the tokens, no softmax map): there are no "
                          "attention tiles for tilesplash to skip"),
        _refused("SanaWMTransformer3DModel",
                 "three of every four blocks run gated-delta-net linear attention (no softmax map, "
                 "no tiles to skip); the softmax blocks (every softmax_every_n-th) call "
                 "F.scaled_dot_product_attention in bfloat16 from a module with no processor to "
                 "switch, inside its camera-conditioned (UCPE) branch"),
        _refused("WanAnimate2Transformer3DModel",
                 "its generation pass attends [generation | reference] keys through a flex BlockMask "
                 "it builds itself (each generation frame sees every generation token and only the "
                 "reference tokens of its own frame index) and asks for the flex backend by name, "
                 "whatever backend the module holds: the reference keys are neither text every "
                 "query sees nor video, and replacing the mask would change what the model "
                 "computes, not only how sparsely"),
        _refused("Cosmos3OmniTransformer",
                 "a packed mixture-of-transformers: the video (generation) queries attend the "
                 "understanding tokens' and their own keys with grouped-query attention (fewer key "
                 "than query heads), packed without a batch axis, beside a causal understanding "
                 "pathway; no call is self-attention over a video grid"),
        _refused("MiniMaxH3Transformer3DModel",
                 "it attends one packed sequence that the caller builds (text, conditioning frames, "
                 "audio and video rows, placed by video_indices / audio_indices / text_indices): the "
                 "video's height and width are in position_ids' values, in no input's shape, so "
                 "the grid cannot be read without a host sync on every call"),
        _refused("AnyFlowFARTransformer3DModel",
                 "its self-attention (AnyFlowCausalAttnProcessor) is block-causal over chunks of "
                 "frames with a KV cache of compressed and full-resolution past frames, a flex "
                 "BlockMask its processor requires the flex backend for: tilesplash's masks are "
                 "bidirectional and do not compose with a causal block mask"),
    ]


def _refused(name: str, why: str) -> ModelSpec:
    """A model tilesplash does not serve: enable() raises NotImplementedError with `why`."""
    return ModelSpec(name, lambda model: [], (), (), lambda model, inputs: (0, 0, 0), refusal=why)


def spec_for(model) -> ModelSpec | None:
    """The spec of `model`'s class (or of the nearest diffusers class it derives from)."""
    by_name = {spec.name: spec for spec in model_specs()}
    for cls in type(model).__mro__:
        if cls.__name__ in by_name and cls.__module__.startswith("diffusers."):
            return by_name[cls.__name__]
    return None
