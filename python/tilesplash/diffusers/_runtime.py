"""What one handle keeps between attention calls: settings, sites, steps, layers, report.

Every tilesplash attention call of an enabled transformer (or pipeline) ends
in ``Runtime.attend``, from the op's real implementation: it observes the
step, reads the key padding, decides whether the call runs dense (warm-up
layers, first and last steps), keeps one ``tilesplash.VideoAttention`` per
transformer, geometry and mode (plans and scratch live across layers and
steps) and appends the call's report.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from dataclasses import dataclass

import torch

import tilesplash

from .._method_options import MethodOptions
from ._steps import Steps

# Sparse VideoGen keeps about the first 20% of the steps dense: the default when the step
# count is known (a pipeline's scheduler, or enable(total_steps=)).
DEFAULT_DENSE_FRACTION = 0.2


@dataclass(frozen=True)
class Settings:
    """What ``enable`` was asked for. ``video_attention_kwargs`` is every keyword the
    handle's ``tilesplash.VideoAttention`` objects get: a new VideoAttention option is
    one field here and one entry there."""

    method: str
    density: float
    density_budget: float | None
    sink: bool | None  # None: the model's default (ModelSpec.sink)
    dense_layers: int
    dense_steps: int | None  # None: DEFAULT_DENSE_FRACTION of the steps when known, else 0
    dense_last_steps: int
    total_steps: int | None  # None: the scheduler's, when a pipeline was given
    force: str | None
    samples: int
    threads: int
    context: tilesplash.ThreadingContext | None = None
    backend: str = "auto"
    precision: str = "default"
    error: float | None = None  # the error target (VideoAttention(error=)); None: density
    densities: tuple | None = None  # its ladder; None: the library's default
    granularity: str = "token"  # "tile": masks rounded out to whole kernel tiles
    compensate: bool = False  # skipped tiles approximated (VideoAttention(compensate=))
    # pooled's p, floor, gate, order and a mix's families (VideoAttention's;
    # _method_options.py)
    method_options: MethodOptions = MethodOptions()

    def video_attention_kwargs(self, model_sink: bool) -> dict:
        return dict(method=self.method, density=self.density, density_budget=self.density_budget,
                    sink=model_sink if self.sink is None else self.sink, text_full=True,
                    samples=self.samples, force=self.force, threads=self.threads,
                    context=self.context, backend=self.backend, precision=self.precision,
                    error=self.error, granularity=self.granularity, compensate=self.compensate,
                    p=self.method_options.p, floor=self.method_options.floor,
                    gate=self.method_options.gate, families=self.method_options.families,
                    order=self.method_options.order,
                    densities=None if self.densities is None else list(self.densities))


class Runtime:
    """The state of one handle, shared by all the transformers it switched."""

    def __init__(self, settings: Settings, steps: Steps, sequence=None) -> None:
        self.settings = settings
        self.steps = steps
        self.sequence = sequence  # a SequenceParallel with process_group, else None
        self.sites: list[tuple[int, str, object]] = []  # (layer, path, ModelState)
        self.records: list[dict] = []
        self._layers: dict[tuple, tilesplash.VideoAttention] = {}
        self._layers_lock = threading.Lock()  # threads calling one model make one object per key

    def copy_settings(self) -> "Runtime":
        """A runtime with these settings for a deep copy of a switched transformer: its own
        VideoAttention objects, report and step count (from the timesteps the copy is
        called with, as a bare transformer's; the number of steps kept when known now)."""
        settings = self.settings
        if settings.total_steps is None and self.steps.total() is not None:
            settings = dataclasses.replace(settings, total_steps=self.steps.total())
        return Runtime(settings, Steps(None), None)

    def add_site(self, layer: int, path: str, state) -> int:
        self.sites.append((layer, path, state))
        return len(self.sites) - 1

    def clear(self) -> None:
        self._layers.clear()

    def total_steps(self) -> int | None:
        return self.settings.total_steps if self.settings.total_steps is not None else self.steps.total()

    def dense(self, layer: int, step: int) -> bool:
        """Whether this call runs every head dense: warm-up layers, first and last steps."""
        s = self.settings
        if layer < s.dense_layers or s.force == "dense":
            return True
        total = self.total_steps()
        first = s.dense_steps
        if first is None:
            first = math.ceil(DEFAULT_DENSE_FRACTION * total) if total else 0
        if step < first:
            return True
        if s.dense_last_steps:
            if total is None:
                raise RuntimeError("tilesplash: dense_last_steps needs the number of steps, and "
                                   "the scheduler has no timesteps yet (run the pipeline, or "
                                   "enable(..., total_steps=N))")
            return step >= total - s.dense_last_steps
        return False

    def attend(self, site: int, q, k, v, timestep, key_mask, video, text: int, text_at: str, scale,
               head_offset: int = 0):
        """Self-attention of every head of one layer: q, k, v [B, S, H, D], frame-major.
        head_offset: the global index of q's first head (diffusers' Ulysses gives each rank
        a share of the heads); the report names heads by it."""
        layer, path, state = self.sites[site]
        step = self.steps.observe(timestep)
        if self.steps.restarted and tilesplash.methods()[self.settings.method]["data_driven"]:
            # A new video: its first step's clusters must not start from the last one's.
            for key, attention in self._layers.items():
                if key[0] == state.index and not key[-1]:
                    attention.reset_clusters()
        frames, height, width = video
        tokens = q.shape[1]
        self._check_tokens(state, tokens, frames, height, width, text)
        key_lengths = key_padding(state, key_mask, q.shape[0], tokens)
        if key_lengths is not None and min(key_lengths) < frames * height * width:
            raise NotImplementedError(
                f"tilesplash: {state.spec.name}'s attention mask drops keys of the video itself "
                f"(real keys {key_lengths} of {frames * height * width} video tokens): tilesplash "
                "serves key padding of the text after the video only")
        dense = self.dense(layer, step)
        attention = self._video_attention(state, (frames, height, width, text, text_at), scale,
                                          dense)
        start = time.perf_counter()
        out, report = attention(q, k, v, layer=layer, step=step, layout="bnhd",
                                key_lengths=key_lengths)
        seconds = time.perf_counter() - start
        fields = dict(
            transformer=state.name, layer=layer, module=path, step=step, seconds=seconds,
            warmup=dense or _peek(report, "warmup"),
            geometry={"frames": frames, "height": height, "width": width, "text": text,
                      "text_at": text_at, "key_lengths": key_lengths})
        self.records.append(_filed(report, fields, head_offset))
        return out

    def _check_tokens(self, state, tokens, frames, height, width, text) -> None:
        if self.sequence is not None:
            if tokens != self.sequence.local_tokens:
                raise ValueError(
                    f"tilesplash: self-attention got {tokens} tokens, but this rank's shard of "
                    f"the {frames} x {height} x {width} video after patching holds "
                    f"{self.sequence.local_tokens}")
            return
        video = frames * height * width
        if text < 0 or (text == 0 and tokens != video):
            raise ValueError(
                f"tilesplash: {state.spec.name}'s self-attention got {tokens} tokens, but the "
                f"transformer's input gives {frames} frames x {height} x {width} after patching = "
                f"{video} video tokens"
                + ("" if state.spec.text_at == "none" else " and more tokens than text")
                + "; a sequence split across processes needs enable(..., process_group=group)")

    def _video_attention(self, state, geometry_key: tuple, scale, dense: bool):
        key = (state.index,) + geometry_key + (scale, dense)
        with self._layers_lock:
            layer = self._layers.get(key)
            if layer is None:
                frames, height, width, text, text_at = geometry_key
                geometry = tilesplash.VideoGeometry(frames, height, width, text=text,
                                                    text_at=text_at)
                kwargs = self.settings.video_attention_kwargs(state.spec.sink)
                if dense:
                    kwargs["force"] = "dense"
                if self.sequence is not None:
                    kwargs.update(group=self.sequence.group, timeout=self.sequence.timeout)
                layer = tilesplash.VideoAttention(geometry, scale=scale, **kwargs)
                self._layers[key] = layer
        return layer


def _filed(report, fields: dict, head_offset: int) -> dict:
    """A call's report with the handle's fields, heads numbered from `head_offset` (a
    context-parallel rank's first head). A routed flex call's report holds its heads on the
    device until read (docs/gpu.md): filed as it is, so that the forward does not wait."""
    if hasattr(report, "updated"):
        return report.updated(fields, head_offset)
    record = {**report, **fields}
    if head_offset:
        record["heads"] = [dict(head, head=head["head"] + head_offset) for head in record["heads"]]
    return record


def _peek(report, key):
    """report[key] (a value other than the heads) without reading a device report's heads."""
    peek = getattr(report, "peek", None)
    return bool(peek(key, False) if peek is not None else report.get(key, False))


def key_padding(state, mask, batch: int, tokens: int) -> list[int] | None:
    """Per batch entry, the number of real keys (a prefix) the attention mask keeps; None
    when it keeps them all. Raises NotImplementedError for a mask that is not key padding."""
    if mask is None:
        return None
    who = f"tilesplash: {state.spec.name}'s attention mask"
    if state.spec.mask == "outer" and mask.dim() >= 3 and mask.shape[-2] != 1:
        # keys & queries (HunyuanVideo 1.5): row 0 (a video query, always real) holds the key
        # mask, and so does the diagonal of a product of the two.
        keys = mask[..., 0, :]
        if not torch.equal(keys, mask.diagonal(dim1=-2, dim2=-1)):
            raise NotImplementedError(f"{who} is not the product of a key mask and a query mask")
        mask = keys
    rows = mask.reshape(mask.shape[0], -1, tokens)
    if rows.shape[1] > 1:  # one copy per head (prepare_attention_mask): must all be the same
        if not bool((rows == rows[:, :1]).all()):
            raise NotImplementedError(f"{who} differs between heads")
    rows = rows[:, 0]
    if rows.dtype == torch.bool:
        keep = rows
    else:
        # An additive mask: 0 keeps, -inf or a large negative value (diffusers' -10000,
        # exp() of which is 0 in any float type) drops; anything else is a bias.
        keep = rows == 0
        if not bool(((rows == 0) | (rows <= -1e4)).all()):
            raise NotImplementedError(f"{who} is an additive bias, not 0 / -inf padding")
    if keep.shape[0] == 1 and batch > 1:
        keep = keep.expand(batch, tokens)
    lengths = keep.sum(dim=-1)
    positions = torch.arange(tokens, device=keep.device)
    if not torch.equal(keep, positions.unsqueeze(0) < lengths.unsqueeze(1)):
        raise NotImplementedError(
            f"{who} drops keys other than the sequence's last ones (tilesplash serves key "
            "padding: a prompt shorter than its text slots, after the video)")
    lengths = [int(n) for n in lengths.tolist()]
    return None if all(n == tokens for n in lengths) else lengths
