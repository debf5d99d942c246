"""tilesplash.jax: tilesplash plans and routing for JAX's Splash Attention.

    import tilesplash, tilesplash.jax as tsj
    info = tsj.mask_info(tilesplash.Mask.causal(), 4096, block_q=512, block_kv=512)
    attend = tsj.splash_attention("local:left=256,right=256", 4096, block_q=512, block_kv=512)
    out = attend(q, k, v)                         # [heads, N, d] jax arrays

Needs JAX (pip install "tilesplash[jax]"); `import tilesplash` never imports
it. See docs/jax.md.
"""

from __future__ import annotations

try:
    import jax  # noqa: F401
    from jax.experimental.pallas.ops.tpu import splash_attention as _splash  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised without JAX
    raise ImportError(
        f"tilesplash.jax needs JAX with Pallas' Splash Attention ({error}); install it with "
        "pip install 'tilesplash[jax]'") from error

from ._kernel import SplashAttention, mask_info, splash_attention
from ._route import Routing, route, token_major_permutation
from ._video import VideoSplashAttention

__all__ = [
    "Routing",
    "SplashAttention",
    "VideoSplashAttention",
    "mask_info",
    "route",
    "splash_attention",
    "token_major_permutation",
]
