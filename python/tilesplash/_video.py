"""tilesplash.VideoAttention: Sparse VideoGen's routed attention for one video geometry."""

from __future__ import annotations

from . import _core
from ._mask import Mask
from ._tensors import (
    INT32_MAX,
    call_arrays,
    check_bool,
    check_float,
    check_int,
    check_layout,
    check_qkv,
    check_scale,
)


class VideoAttention:
    """Routed sparse attention over every head of a layer of a video model.

    Each call samples `samples` video query rows per head, computes their exact
    attention under the dense, spatial and temporal masks, and runs the head
    with the mask whose output is closer to dense (temporal heads are permuted
    to token-major order and back); layers below `dense_layers` and steps below
    `dense_steps` run dense, and `force` fixes every head's mask instead.

    geometry: a tilesplash.VideoGeometry (tokens = text + frames * height * width).
    density: target density of both masks (sink and text included), used when
    `band` (half-width in tokens) is not given. sink: keep frame 0's keys for
    every video query (Wan); text_full: text rows and columns attend everything.
    threads: 0 uses every core. block_q / block_kv: tiles; by default the tuned
    choice for this geometry's band plan, head dim and dtype (`tilesplash tune
    --preset ...`), else 256 x 256. scale: default 1/sqrt(d).

    One object serves one call at a time (calls from several threads queue);
    keep it across layers and steps so plans are built once.
    """

    def __init__(self, geometry, *, density=0.25, band=None, sink=False, text_full=True,
                 dense_layers=0, dense_steps=0, samples=64, seed=0, force=None, threads=0,
                 block_q=None, block_kv=None, scale=None):
        if not isinstance(geometry, _core.VideoGeometry):
            raise TypeError(f"geometry: expected a tilesplash.VideoGeometry, got "
                            f"{type(geometry).__name__}")
        if force is not None and not isinstance(force, str):
            raise TypeError(f"force: expected None or a mask name ('dense', 'spatial', "
                            f"'temporal'), got {type(force).__name__}")
        self._core = _core.VideoAttention(
            geometry, check_float(density, "density", "a float in (0, 1]"),
            check_int(band, "band", 0, allow_none=True), check_bool(sink, "sink"),
            check_bool(text_full, "text_full"), check_int(dense_layers, "dense_layers", 0),
            check_int(dense_steps, "dense_steps", 0), check_int(samples, "samples", 1),
            check_int(seed, "seed", 0, maximum=2**64 - 1), force,
            check_int(threads, "threads", 0, maximum=INT32_MAX),
            check_int(block_q, "block_q", 1, allow_none=True),
            check_int(block_kv, "block_kv", 1, allow_none=True), check_scale(scale))

    @property
    def geometry(self):
        return self._core.geometry

    @property
    def band(self) -> int:
        """The band half-width W in tokens (given, or resolved from density)."""
        return self._core.band

    def mask(self, choice: str) -> Mask:
        """The mask a head with this choice ("dense", "spatial", "temporal") runs, on the
        original token order."""
        if not isinstance(choice, str):
            raise TypeError(f"choice: expected 'dense', 'spatial' or 'temporal', got {choice!r}")
        return Mask(self._core.mask(choice))

    def __call__(self, q, k, v, layer=0, step=0, layout="bnhd", return_lse=False):
        """Attention of every head of q, k, v ([.., tokens, ..] in `layout`, tokens =
        geometry.tokens, original frame-major order) at this layer and denoising step.

        Returns (out, report), or (out, lse, report) with return_lse=True; out has
        q's type, dtype and layout. report: {"heads": [one dict per (batch entry,
        head): "batch", "head", "choice" ("dense" | "spatial" | "temporal"),
        "routed", "mse_spatial", "mse_temporal" (None when not routed), "density",
        "seconds", "permute_seconds"], "band", "warmup", "block_q", "block_kv",
        "blocks_tuned", "routing_seconds", "plan_seconds", "permute_seconds",
        "attention_seconds", "total_seconds" (sums over batch entries), "seconds"
        (the whole call)}.
        """
        layout = check_layout(layout)
        kind = check_qkv(q, k, v, layout)
        layer = check_int(layer, "layer", 0)
        step = check_int(step, "step", 0)
        return_lse = check_bool(return_lse, "return_lse")
        descs, lse_address, out, lse, held = call_arrays(kind, q, k, v, layout)
        report = self._core.forward(*descs, lse_address, layout, layer, step)
        del held  # copies of odd views stay alive until the core has returned
        return (out, lse, report) if return_lse else (out, report)

    def __repr__(self) -> str:
        return f"tilesplash.VideoAttention({self.geometry}, band={self.band})"
