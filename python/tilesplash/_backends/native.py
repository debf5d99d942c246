"""The native CPU kernel (the C++ engine) as a backend: NumPy arrays and CPU tensors."""

from __future__ import annotations

from .._checks import NATIVE_BLOCKS
from .._tensors import is_torch
from .base import Backend


class NativeBackend(Backend):
    name = "cpu"
    summary = "the native CPU kernel (NumPy arrays and CPU tensors)"
    precisions = ("default", "int8")
    compensates = True
    blocks = NATIVE_BLOCKS

    def is_default_for(self, q) -> bool:
        return not is_torch(q) or q.device.type == "cpu"

    def check_input(self, q) -> None:
        if is_torch(q) and q.device.type != "cpu":
            raise ValueError(f"q: backend 'cpu' runs CPU tensors, got a tensor on device "
                             f"'{q.device}'; pass backend='auto' or 'flex' for FlexAttention")

    def mask_argument(self, mask, kind):
        # torch on the native kernel: the op takes the SPEC and parses it when it runs, so
        # that code torch.compile traces (fullgraph=True) never calls into the extension.
        from .._mask import as_mask, spec_of

        return spec_of(mask) if kind == "torch" else as_mask(mask)

    def attention(self, q, k, v, *, mask, layout, scale, block_q, block_kv, threads, window,
                  context, precision, kind, compensate=False):
        if kind == "torch":
            from .._threading import handle_of
            from .._torch_ops import attention_op

            return attention_op(q, k, v, mask, layout, scale, block_q, block_kv, threads,
                                *window, handle_of(context), precision, compensate)
        from .._kernel_call import run_attention

        return run_attention("numpy", q, k, v, layout, mask, scale, block_q, block_kv, threads,
                             window, context, precision, compensate)

    def merge(self, out_a, lse_a, out_b, lse_b, layout):
        from .._merge import merge_attention

        kind = "torch" if is_torch(out_a) else "numpy"
        dtype = "float32"
        if kind == "torch":
            import torch

            dtype = torch.float32
        return merge_attention([out_a, out_b], [lse_a, lse_b], layout=layout, dtype=dtype)
