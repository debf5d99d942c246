"""tilesplash as a diffusers attention backend, and the op it calls.

diffusers 0.42's processors call ``dispatch_attention_fn(q, k, v, attn_mask=...,
backend=self._attention_backend)``, which looks the backend up in
``_AttentionBackendRegistry``. ``register()`` adds the name "tilesplash" to
``AttentionBackendName`` at run time (as NVIDIA ModelOpt and cache-dit add
theirs) with ``attention()`` as its function; ``enable`` gives each switched
self-attention module a copy of its processor whose ``_attention_backend`` is
that name, so cross-attention and every other module keep theirs.

The dispatcher passes no layer, step or video shape. A forward pre-hook on
each switched module makes its ``Site`` the current one, and the
transformer's pre-hook stores the call's ``Forward`` (geometry, timestep,
token order) on the model's ``ModelState``; ``attention()`` reads both, moves
tokens to frame-major order where a model keeps them otherwise, and calls
``torch.ops.tilesplash.video_attention``: one opaque custom op (with a fake
for tracing), so ``torch.compile`` captures the whole forward, hooks
included, in one graph around it. Everything the op needs comes in as
arguments (tensors, or ints fixed at trace time); the step, the report and
the VideoAttention objects live in the handle's ``Runtime``, which the op's
real implementation looks up by id at run time.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from dataclasses import dataclass
from typing import Optional

import torch

from ._models import ModelSpec, TokenOrder

BACKEND_NAME = "tilesplash"

_RUNTIMES: "weakref.WeakValueDictionary[int, object]" = weakref.WeakValueDictionary()
_IDS = itertools.count(1)


def add_runtime(runtime) -> int:
    """A new id under which the op finds `runtime` (held weakly: the handle owns it)."""
    key = next(_IDS)
    _RUNTIMES[key] = runtime
    return key


def drop_runtime(key: int) -> None:
    """After remove(): a compiled graph that still called the op would raise, not run."""
    _RUNTIMES.pop(key, None)


class ModelState:
    """One switched transformer: its spec and the current forward's geometry.

    The forward is per thread: one enabled model called from several threads at
    once (inputs of different shapes) gives each call its own geometry."""

    def __init__(self, spec: ModelSpec, name: str, index: int) -> None:
        self.spec = spec
        self.index = index  # among the handle's transformers
        self.name = name  # a pipeline's component name ("transformer_2"), or the class name
        self._calls = threading.local()

    @property
    def forward(self):
        """The _models.Forward of this thread's call in progress (None outside one)."""
        return getattr(self._calls, "forward", None)

    @forward.setter
    def forward(self, call) -> None:
        self._calls.forward = call


@dataclass
class Site:
    """One switched attention module: its runtime, model, layer and path."""

    runtime_id: int
    index: int  # in the runtime's site table (layer, path, model)
    model: ModelState


class _Current(threading.local):
    """The switched module running in this thread: models in two threads do not mix."""

    site: Site | None = None


_current = _Current()


def enter(site: Site) -> None:
    """From a switched module's forward pre-hook: its calls to the backend are `site`'s."""
    _current.site = site


def leave(module, args, output):
    _current.site = None


def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
              enable_gqa=False, _parallel_config=None):
    """The "tilesplash" backend: diffusers' layout, q, k, v [B, S, H, D] and out [B, S, H, Dv].

    Under diffusers' context parallelism (``enable_parallelism``; the dispatcher passes the
    model's ``_parallel_config``) each rank holds a shard of the sequence: diffusers' own
    Ulysses template gives every rank the whole sequence for its share of the heads, the
    video attention runs on that (the whole video's geometry, each head routed as one
    process routes it: no decision depends on where a head sits in the call), and the
    template returns each rank its shard."""
    ulysses = _ulysses(_parallel_config)
    if ulysses is None:
        return _attention(query, key, value, attn_mask, dropout_p, is_causal, scale)
    from diffusers.models.attention_dispatch import _templated_context_parallel_attention

    def forward_op(ctx, q, k, v, mask, dropout, causal, scale_, gqa, return_lse, _save_ctx=True,
                   _parallel_config=None):
        if return_lse:
            raise NotImplementedError("tilesplash: the tilesplash backend returns no LSE")
        # Rank r of the Ulysses mesh holds heads [r * H / N, (r + 1) * H / N) after the exchange.
        return _attention(q, k, v, mask, dropout, causal, scale_, head_offset=ulysses * q.shape[2])

    return _templated_context_parallel_attention(
        query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, False,
        forward_op=forward_op, backward_op=_no_backward, _parallel_config=_parallel_config)


def _ulysses(parallel_config) -> int | None:
    """None without context parallelism; else this rank's place in the Ulysses mesh."""
    config = getattr(parallel_config, "context_parallel_config", None)
    if config is None or config.ring_degree * config.ulysses_degree <= 1:
        return None
    if config.ring_degree > 1:
        raise NotImplementedError(
            f"tilesplash: diffusers' ring attention (ring_degree={config.ring_degree}) is not "
            "supported: each ring step attends one rank's keys and merges partial results "
            "through their LSEs, while tilesplash's masks and routing need every key of the "
            "video at once; use ContextParallelConfig(ulysses_degree=N)")
    return config._ulysses_local_rank


def _no_backward(*args, **kwargs):
    raise RuntimeError("tilesplash.diffusers is inference only (no backward)")


def _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, head_offset=0):
    site = _current.site
    if site is None:
        raise RuntimeError(
            "tilesplash: the tilesplash attention backend was called outside a module that "
            "tilesplash.diffusers.enable switched (set_attention_backend('tilesplash') is not "
            "supported: enable() chooses the modules)")
    state = site.model
    call = state.forward
    if call is None:
        raise RuntimeError(
            "tilesplash: the geometry is unknown: call the transformer itself, not its blocks "
            "(the transformer's forward hook reads the video's shape and the timestep)")
    if dropout_p:
        raise ValueError(f"tilesplash: attention dropout is not supported (got dropout_p={dropout_p}); "
                         "tilesplash is for inference: call model.eval()")
    if is_causal:
        raise NotImplementedError(f"tilesplash: {state.spec.name} asked for causal attention, which its "
                                  "video self-attention never is")
    if key.shape[2] != query.shape[2]:
        raise NotImplementedError(f"tilesplash: {state.spec.name} has {key.shape[2]} key heads for "
                                  f"{query.shape[2]} query heads (grouped-query attention)")
    if torch.is_grad_enabled() and (query.requires_grad or key.requires_grad or value.requires_grad):
        # The kernel has no backward: going on would cut the autograd graph silently.
        raise RuntimeError(
            "tilesplash.diffusers is inference only (no backward): call the transformer under "
            "torch.no_grad() or torch.inference_mode(), as diffusers pipelines do")
    frames, height, width = call.video
    tokens = query.shape[1]
    mask = _key_mask(state, attn_mask, tokens)
    order = call.order
    text_at = state.spec.text_at
    if order is not None:
        rows = _frame_major_rows(order, frames, height, width, tokens, query.device)
        query, key, value = (x.index_select(1, rows) for x in (query, key, value))
        if mask is not None:
            mask = mask.index_select(mask.dim() - 1, rows)
            if state.spec.mask == "outer" and mask.dim() >= 3:
                mask = mask.index_select(mask.dim() - 2, rows)
        if order.kind == "history":
            text_at = "after"  # the history tokens join the text, after the video
    text = tokens - frames * height * width if text_at != "none" else 0
    if text == 0:
        text_at = "none"
    out = torch.ops.tilesplash.video_attention(
        query, key, value, call.timestep, mask, site.runtime_id, site.index, frames, height, width,
        text, text_at, scale, head_offset)
    if order is not None:
        out = out.index_select(1, torch.argsort(rows))
    return out


def _key_mask(state: ModelState, attn_mask, tokens: int):
    """attn_mask as the op takes it: None, or a tensor whose last axis is the keys.

    Shapes are checked here (static under tracing); values (padding a prefix, an
    additive bias of 0 / -inf only) in the op, where they are known.
    """
    if attn_mask is None:
        return None
    if type(attn_mask).__name__ == "BlockMask":
        # Kandinsky 5's NABLA: its own block-sparse attention, which tilesplash replaces.
        return None
    if not isinstance(attn_mask, torch.Tensor):
        raise NotImplementedError(f"tilesplash: {state.spec.name} passed an attention mask of type "
                                  f"{type(attn_mask).__name__}")
    if attn_mask.shape[-1] != tokens:
        raise ValueError(f"tilesplash: {state.spec.name}'s attention mask covers {attn_mask.shape[-1]} "
                         f"keys, the sequence has {tokens}")
    queries = attn_mask.shape[-2] if attn_mask.dim() >= 3 else 1
    if queries != 1 and state.spec.mask != "outer":
        reason = state.spec.full_mask or "a mask per query and key is not key padding"
        raise NotImplementedError(f"tilesplash: {state.spec.name} passed an attention mask of shape "
                                  f"{tuple(attn_mask.shape)}: {reason}")
    return attn_mask


def _frame_major_rows(order: TokenOrder, frames: int, height: int, width: int, tokens: int, device):
    """rows[r] = the model's position of frame-major (then text) position r."""
    video = frames * height * width
    if order.kind == "history":
        p = order.prefix
        return torch.cat([torch.arange(p, p + video, device=device), torch.arange(0, p, device=device),
                          torch.arange(p + video, tokens, device=device)])
    if order.kind == "tiles":
        t = order.tile
        if height % t or width % t:
            raise ValueError(f"tilesplash: a {t} x {t} tile order needs height and width multiples "
                             f"of {t}, got {height} x {width}")
        # The model's index of (f, tile_y, tile_x, y, x), read in frame-major (f, tile_y, y, tile_x, x).
        model_index = torch.arange(video, device=device).reshape(frames, height // t, width // t, t, t)
        video_rows = model_index.permute(0, 1, 3, 2, 4).reshape(-1)
        return torch.cat([video_rows, torch.arange(video, tokens, device=device)])
    raise ValueError(f"tilesplash: unknown token order {order.kind!r}")


# ---- the op ----------------------------------------------------------------------------


@torch.library.custom_op("tilesplash::video_attention", mutates_args=())
def video_attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, timestep: torch.Tensor,
                       key_mask: Optional[torch.Tensor], runtime: int, site: int, frames: int,
                       height: int, width: int, text: int, text_at: str,
                       scale: Optional[float], head_offset: int) -> torch.Tensor:
    found = _RUNTIMES.get(runtime)
    if found is None:
        raise RuntimeError("tilesplash: this transformer's tilesplash handle was removed; a model "
                           "compiled while it was enabled must be compiled again")
    return found.attend(site, q, k, v, timestep, key_mask, (frames, height, width), text, text_at,
                        scale, head_offset)


@video_attention_op.register_fake
def _video_attention_fake(q, k, v, timestep, key_mask, runtime, site, frames, height, width, text,
                          text_at, scale, head_offset):
    return q.new_empty(tuple(q.shape[:-1]) + (v.shape[-1],))


# ---- registration with diffusers -------------------------------------------------------


def backend_name():
    """The AttentionBackendName member "tilesplash", added to diffusers' enum and registry once."""
    from diffusers.models import attention_dispatch as dispatch

    names = dispatch.AttentionBackendName
    member = names._value2member_map_.get(BACKEND_NAME)
    if member is None:
        member = str.__new__(names, BACKEND_NAME)
        member._name_ = BACKEND_NAME.upper()
        member._value_ = BACKEND_NAME
        member.__objclass__ = names
        type.__setattr__(names, member._name_, member)  # EnumType.__setattr__ refuses members
        names._member_map_[member._name_] = member
        names._value2member_map_[BACKEND_NAME] = member
        names._member_names_.append(member._name_)
    registry = dispatch._AttentionBackendRegistry
    if registry._backends.get(member) is not attention:
        # Context-parallel capable: enable_parallelism accepts it, and the dispatcher passes
        # the model's _parallel_config (attention() runs diffusers' Ulysses template with it).
        registry.register(member, supports_context_parallel=True)(attention)
    return member
