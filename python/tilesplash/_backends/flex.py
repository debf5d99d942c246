"""PyTorch's FlexAttention as a backend: torch tensors on any device it runs on
(compiled on GPUs, eager on the CPU). torch is imported when a call runs."""

from __future__ import annotations

from .._checks import FLEX_BLOCKS
from .._methods import method_flag
from .._tensors import is_torch
from .base import Backend


def _tracing() -> bool:
    """Whether torch.compile is tracing the caller (torch is imported by then)."""
    import torch

    return torch.compiler.is_compiling()


class FlexBackend(Backend):
    name = "flex"
    summary = "PyTorch FlexAttention (torch tensors on any device; docs/gpu.md)"
    any_device = True
    compensates = True  # in torch ops after the call (_torch_video/compensation.py)
    blocks = FLEX_BLOCKS

    def is_default_for(self, q) -> bool:
        return is_torch(q) and q.device.type != "cpu"

    def check_input(self, q) -> None:
        if not is_torch(q):
            raise TypeError("backend: 'flex' runs torch tensors (FlexAttention); got "
                            f"{type(q).__module__}.{type(q).__qualname__} q")

    def mask_argument(self, mask, kind):
        # Under torch.compile the call becomes one opaque op that takes the SPEC and parses
        # it when it runs: the traced code never calls into the extension (fullgraph=True).
        from .._mask import as_mask, spec_of

        return spec_of(mask) if _tracing() else as_mask(mask)

    def attention(self, q, k, v, *, mask, layout, scale, block_q, block_kv, threads, window,
                  context, precision, kind, compensate=False):
        if isinstance(mask, str):  # traced: mask_argument() kept the SPEC
            from .._flex.op import flex_attention_op

            return flex_attention_op(q, k, v, mask, layout, scale, block_q, block_kv, *window,
                                     compensate=compensate)
        from .._flex.attention import flex_masked_attention
        from .._torch_video.grad import forward_only, no_backward, wants_grad

        # FlexAttention has no backward on CPU tensors: the forward runs, its backward raises.
        refuse = q.device.type == "cpu" and wants_grad(q, k, v)
        with forward_only(refuse):
            out, lse = flex_masked_attention(q, k, v, mask, layout, scale, block_q, block_kv,
                                             window, compensate=compensate)
        if refuse:
            out = no_backward(out, "tilesplash.attention on backend 'flex' with cpu tensors",
                              q, k, v)
        return out, lse

    def merge(self, out_a, lse_a, out_b, lse_b, layout):
        from .._lse_merge import merge_lse

        return merge_lse([out_a, out_b], [lse_a, lse_b], layout)

    def video_runner(self, owner, settings):
        from .._torch_video.runner import FlexVideo

        if owner.pooled_options is not None:
            # Only svg2's clusters run on the device; pooled heads rank their
            # tiles in the native front door, alone or routed in a mix.
            among = "" if method_flag(owner.method, "data_driven") else " with 'pooled' among its families"
            raise NotImplementedError(
                f"method {owner.method!r}{among} does not run on the flex backend (its heads rank "
                f"their own pooled key tiles in the native front door); use backend='cpu'")

        return FlexVideo(owner, **settings)
