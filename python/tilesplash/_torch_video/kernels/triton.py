"""FlexAttention's own template: Triton on GPUs (options chosen to fit, stepping down
when refused: options.py), inductor's C++ template or eager on CPUs. Runs every call."""

from __future__ import annotations

from ..._flex.kernel import run_flex
from .base import Kernel


class TritonKernel(Kernel):
    name = "triton"

    def unavailable(self, block_mask, q, need_lse):
        return None

    def run(self, q, k, v, block_mask, scale, *, compile, need_lse, kernel_options):
        return run_flex(q, k, v, block_mask, scale, compile=compile, return_lse=need_lse,
                        kernel_options=kernel_options)
