"""State shared by the tilesplash processors of one enabled transformer.

diffusers does not pass the denoising step, the layer or the video's shape to
attention processors. The transformer's forward pre-hook records them here
(the geometry from the input's shape and the model's patch size, the step from
the sequence of timesteps), each processor knows its own layer, and every
attention call goes through ``Runtime.attend``, which keeps one
``tilesplash.VideoAttention`` per geometry (plans and scratch live across
layers and steps) and appends the call's report.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

import tilesplash


@dataclass(frozen=True)
class Settings:
    """What ``enable`` was asked for, passed to every VideoAttention."""

    density: float
    sink: bool
    dense_layers: int
    dense_steps: int
    force: str | None
    samples: int
    threads: int
    method: str = "svg"
    density_budget: float | None = None
    context: tilesplash.ThreadingContext | None = None
    backend: str = "auto"


class StepCounter:
    """The denoising step from the timesteps the transformer is called with.

    A timestep different from the previous call's starts a new step, so the
    two calls of classifier-free guidance at one timestep are one step. A
    timestep larger than the previous one starts a new denoising run at step 0
    (samplers walk timesteps downwards), so a pipeline called twice counts
    both runs from 0. ``pin(i)`` makes the next call step ``i`` whatever its
    timestep; counting resumes from there.
    """

    def __init__(self) -> None:
        self.step = 0
        self.restarted = False  # the last observe() began a new denoising run
        self._last: torch.Tensor | None = None
        self._pinned = False

    def pin(self, step: int) -> None:
        self.step = step
        self._pinned = True

    def observe(self, timestep) -> int:
        # The distinct values, so that the batch size (CFG batched or not,
        # several videos per prompt) or a per-token timestep layout does not
        # make the same timestep look new. unique() also copies, which matters:
        # a pipeline may update its timestep tensor in place.
        current = torch.unique(torch.as_tensor(timestep).detach().flatten().to(torch.float64))
        last = self._last
        self.restarted = False
        if self._pinned:
            self._pinned = False
        elif last is None:
            self.step = 0
        elif not torch.equal(last, current):
            if current.numel() and last.numel() and bool(current.max() > last.max()):
                self.step = 0
                self.restarted = True
            else:
                self.step += 1
        self._last = current
        return self.step


class Runtime:
    """Geometry, step, VideoAttention cache and the report of one handle."""

    def __init__(self, settings: Settings, sequence=None) -> None:
        self.settings = settings
        self.sequence = sequence  # a SequenceParallel with process_group, else None
        self.steps = StepCounter()
        self.video: tuple[int, int, int] | None = None  # latent frames, height, width after patching
        self.records: list[dict] = []
        self._layers: dict[tuple, tilesplash.VideoAttention] = {}

    def begin_forward(self, video: tuple[int, int, int], timestep) -> None:
        self.video = video
        self.steps.observe(timestep)
        if self.steps.restarted and self.settings.method == "svg2":
            # A new video: its first step's clusters must not start from the
            # last video's last step.
            for layer in self._layers.values():
                layer.reset_clusters()

    def clear(self) -> None:
        self._layers.clear()
        self.video = None

    def _video_attention(self, geometry_key: tuple) -> tilesplash.VideoAttention:
        layer = self._layers.get(geometry_key)
        if layer is None:
            frames, height, width, text, text_at = geometry_key
            s = self.settings
            geometry = tilesplash.VideoGeometry(frames, height, width, text=text, text_at=text_at)
            layer = tilesplash.VideoAttention(
                geometry,
                method=s.method,
                density=s.density,
                density_budget=s.density_budget,
                sink=s.sink,
                text_full=True,
                dense_layers=s.dense_layers,
                dense_steps=s.dense_steps,
                samples=s.samples,
                force=s.force,
                threads=s.threads,
                context=s.context,
                group=None if self.sequence is None else self.sequence.group,
                timeout=None if self.sequence is None else self.sequence.timeout,
                backend=s.backend,
            )
            self._layers[geometry_key] = layer
        return layer

    def attend(self, q, k, v, *, layer: int, module: str, layout: str, text: int = 0, text_at: str = "none"):
        """Self-attention of every head of one layer; q, k, v as the model holds them."""
        if self.video is None:
            raise RuntimeError(
                "tilesplash: the geometry is unknown: call the transformer itself, not its blocks "
                "(the transformer's forward hook reads the video's shape and the timestep)"
            )
        frames, height, width = self.video
        tokens = q.shape[1] if layout == "bnhd" else q.shape[2]
        expected = frames * height * width + text
        if self.sequence is not None:
            expected = self.sequence.local_tokens
            if tokens != expected:
                raise ValueError(
                    f"tilesplash: self-attention got {tokens} tokens, but this rank's shard of the "
                    f"{frames} x {height} x {width} video after patching holds {expected}"
                )
        elif tokens != expected:
            raise ValueError(
                f"tilesplash: self-attention got {tokens} tokens, but the transformer's input gives "
                f"{frames} frames x {height} x {width} after patching + {text} text = {expected}; "
                "a sequence split across processes needs enable(..., process_group=group)"
            )
        if torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad):
            # The kernel has no backward: going on would cut the autograd graph silently.
            raise RuntimeError(
                "tilesplash.diffusers is inference only (no backward): call the transformer under "
                "torch.no_grad() or torch.inference_mode(), as diffusers pipelines do"
            )
        step = self.steps.step
        video_attention = self._video_attention((frames, height, width, text, text_at))
        start = time.perf_counter()
        out, report = video_attention(q, k, v, layer=layer, step=step, layout=layout)
        seconds = time.perf_counter() - start
        record = dict(report)
        record.update(
            layer=layer,
            module=module,
            step=step,
            seconds=seconds,
            geometry={"frames": frames, "height": height, "width": width, "text": text},
        )
        self.records.append(record)
        return out


_SVG_CHOICES = ("dense", "spatial", "temporal")


def summarize(report: list[dict]) -> list[dict]:
    """One row per denoising step of a handle's report: how its heads ran.

    Each row: ``step``, ``calls`` (attention calls), ``dense`` / ``spatial`` /
    ``temporal`` (head counts over all calls; always present), one count per
    other choice that occurs (e.g. ``radial``, ``sta:3x3x3``, ``svg2``),
    ``density`` (mean over heads of the density each head ran with) and
    ``seconds`` (attention time).
    """
    rows: dict[int, dict] = {}
    for record in report:
        row = rows.setdefault(
            record["step"],
            {"step": record["step"], "calls": 0, "dense": 0, "spatial": 0, "temporal": 0, "density": 0.0, "seconds": 0.0},
        )
        row["calls"] += 1
        row["seconds"] += record["seconds"]
        for head in record["heads"]:
            row[head["choice"]] = row.get(head["choice"], 0) + 1
            row["density"] += head["density"]
    for row in rows.values():
        heads = sum(row[choice] for choice in _choices(row))
        row["density"] = row["density"] / heads if heads else 1.0
    return [rows[step] for step in sorted(rows)]


def _choices(row: dict) -> list[str]:
    """The head-count keys of a summarize() row: dense, spatial, temporal, then the others."""
    fixed = {"step", "calls", "density", "seconds"}
    return list(_SVG_CHOICES) + [key for key in row if key not in fixed and key not in _SVG_CHOICES]


def summary_table(report: list[dict]) -> str:
    """``summarize(report)`` as a text table, one line per step; a column per choice
    beyond dense, spatial and temporal that occurs."""
    rows = summarize(report)
    others = list(dict.fromkeys(key for row in rows for key in _choices(row)[len(_SVG_CHOICES):]))
    widths = [max(5, len(name)) for name in others]
    lines = ["step  calls  dense  spatial  temporal"
             + "".join(f"  {name:>{width}}" for name, width in zip(others, widths))
             + "  density  attention_ms"]
    for row in rows:
        lines.append(
            f"{row['step']:>4}  {row['calls']:>5}  {row['dense']:>5}  {row['spatial']:>7}  {row['temporal']:>8}"
            + "".join(f"  {row.get(name, 0):>{width}}" for name, width in zip(others, widths))
            + f"  {row['density']:>7.3f}  {1000 * row['seconds']:>12.1f}"
        )
    return "\n".join(lines)
