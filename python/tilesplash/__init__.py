"""tilesplash: block-sparse attention for video diffusion transformers. Its own engine
runs on the CPU; GPUs run the same masks and routing through PyTorch FlexAttention
(backend="flex", tilesplash.flex, docs/gpu.md) and JAX through tilesplash.jax
(docs/jax.md).

    import numpy as np, tilesplash
    out = tilesplash.attention(q, k, v, mask="causal", layout="bhnd")
    layer = tilesplash.VideoAttention(tilesplash.VideoGeometry(21, 30, 52), density=0.25, sink=True)
    out, report = layer(q, k, v, layer=3, step=12)   # bnhd by default

NumPy is the only requirement; PyTorch tensors work when torch is installed
(CPU tensors through the op torch.ops.tilesplash.attention, tensors on other
devices through FlexAttention with backend="auto"), and tilesplash.diffusers
switches a diffusers video transformer to tilesplash. See docs/python.md.
"""

from __future__ import annotations

import sys as _sys

from . import _core
from ._attention import TilePlan, attention, plan, set_plan_cache_capacity
from ._clusters import KMeansResult, kmeans
from ._core import VideoGeometry, active_isa, available_isas, presets
from ._core import clear_plan_cache, plan_cache_stats
from ._mask import Mask
from ._merge import merge_attention
from ._methods import methods
from ._threading import ThreadingContext, hardware_threads
from ._video import VideoAttention

__version__ = _core.LIBRARY_VERSION

__all__ = [
    "KMeansResult",
    "Mask",
    "ThreadingContext",
    "TilePlan",
    "VideoAttention",
    "VideoGeometry",
    "active_isa",
    "attention",
    "available_isas",
    "clear_plan_cache",
    "hardware_threads",
    "kmeans",
    "merge_attention",
    "methods",
    "plan",
    "plan_cache_stats",
    "presets",
    "set_plan_cache_capacity",
]

# torch already loaded: register the op now, so that torch.compile meets it
# registered even when the first call is being traced.
if "torch" in _sys.modules:
    from . import _torch_ops  # noqa: F401
