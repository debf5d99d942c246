"""The core's attention call on arguments the callers have checked.

Shared by tilesplash.attention() (NumPy) and the torch op (_torch_ops), which
both import it from here; neither imports the other at module level, so the
package has no import cycle.
"""

from __future__ import annotations

from . import _core
from ._mask import Mask
from ._tensors import call_arrays
from ._threading import ThreadingContext, core_of
from ._window import seq_len, window_core


def run_attention(kind, q, k, v, layout, mask: Mask, scale, block_q, block_kv, threads,
                  window=(0, 0, 0, 0), context: ThreadingContext | None = None,
                  precision: str = "default", compensate: bool = False):
    """The core call on checked arguments: (out, lse), new arrays of q's kind.
    window: from window_args(); (0, 0, 0, 0) is the whole map."""
    core_mask = window_core(mask, seq_len(q, layout), seq_len(k, layout), window)
    descs, lse_address, out, lse, held = call_arrays(kind, q, k, v, layout)
    _core.attention(*descs, lse_address, layout, core_mask, scale, block_q, block_kv, threads,
                    True, core_of(context), precision, compensate)
    del held  # copies of odd views stay alive until the core has returned
    return out, lse
