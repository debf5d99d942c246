"""torch.ops.tilesplash.flex_attention: tilesplash.attention(..., backend="flex") as one
opaque op for code that torch.compile traces.

Building a BlockMask reads the mask's plan through the extension (parsing a
SPEC, planning tiles, caches): dynamo cannot trace that, so with
fullgraph=True the flex path failed at `_core.Mask.parse` (issue 37, item
3). Under tracing, attention() calls this op instead: the SPEC travels as a
string, the fake gives the output shapes, and at run time the op runs the
same flex path as an eager call. Outside tracing the op is not used, so
autograd goes through FlexAttention as before; inside a compiled graph it is
forward only, as the native op is.
"""

from __future__ import annotations

import threading
from typing import Optional

import torch

from .._mask import as_mask
from .._tensors import batch_heads_len, out_shape
from .attention import flex_masked_attention
from .kernel import use_compile


def _on_a_clean_thread(work):
    """work() on a new thread. Eager FlexAttention traces its mask_mod with dynamo and
    vmap, which fails under the state a compiled graph runs its ops in (dynamo disabled,
    autograd keys excluded: "could not find kernel for custom_function_call"); a new
    thread starts from none of it. Used for the CPU's eager path only: a compiled GPU
    call runs in place, on the caller's stream."""
    box: dict = {}

    def run():
        try:
            box["result"] = work()
        except BaseException as error:  # re-raised on the caller's thread
            box["error"] = error

    thread = threading.Thread(target=run, name="tilesplash-flex-op")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


@torch.library.custom_op("tilesplash::flex_attention", mutates_args=())
def flex_attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: str, layout: str,
                      scale: Optional[float], block_q: Optional[int], block_kv: Optional[int],
                      q_offset: int = 0, kv_offset: int = 0, q_total: int = 0,
                      kv_total: int = 0, compensate: bool = False
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    def work():
        return flex_masked_attention(q, k, v, as_mask(mask), layout, scale, block_q, block_kv,
                                     (q_offset, kv_offset, q_total, kv_total),
                                     compensate=compensate)

    # Eager on the CPU (flex_masked_attention asks for the LSE, which the CPU's compiled
    # template lacks).
    out, lse = work() if use_compile(None, q.device) else _on_a_clean_thread(work)
    # An op's outputs may not alias its inputs or each other.
    return out.contiguous().clone(), lse.contiguous().clone()


@flex_attention_op.register_fake
def _flex_attention_fake(q, k, v, mask, layout, scale, block_q, block_kv, q_offset=0,
                         kv_offset=0, q_total=0, kv_total=0, compensate=False):
    return (q.new_empty(out_shape(q, v)),
            q.new_empty(batch_heads_len(q, layout), dtype=torch.float32))
