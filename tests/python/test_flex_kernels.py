"""The torch runner's kernels behind one interface (_torch_video/kernels): the first that can
run a call runs it, the report names it and those passed over with why; FA4 (through
FlexAttention's FLASH backend) is used where installed, else Triton, named; dense work
runs on SDPA; a kernel that refuses a call hands it to the next."""

from __future__ import annotations

import numpy as np
import pytest

from tilesplash import VideoAttention, VideoGeometry

torch = pytest.importorskip("torch")
from tilesplash._torch_video import kernels  # noqa: E402
from tilesplash._torch_video.kernels.base import Kernel, KernelRefused  # noqa: E402
from tilesplash._torch_video.kernels.triton import TritonKernel  # noqa: E402

G = VideoGeometry(3, 4, 6)


def _qkv():
    rng = np.random.default_rng(0)
    return [torch.from_numpy(rng.standard_normal((1, G.tokens, 2, 16)).astype(np.float32))
            for _ in range(3)]


def test_the_report_names_the_kernels_and_why_others_were_passed_over():
    q, k, v = _qkv()
    _, report = VideoAttention(G, density=0.3, sink=True, backend="flex")(q, k, v)
    assert set(report["kernels"]) == {"triton"}
    why = report["kernels"]["triton"]["flash"]
    assert "flash-attn-4" in why or "CUDA" in why
    _, report = VideoAttention(G, density=0.3, backend="flex", dense_layers=1)(q, k, v)
    assert report["kernels"] == {"sdpa": {}}


class _Counting(Kernel):
    """A new kernel: one class, one line in KERNELS."""

    name = "counting"

    def __init__(self, refuse=False):
        self.calls, self.refuse = 0, refuse

    def unavailable(self, block_mask, q, need_lse):
        return "refused before" if self.refuse and self.calls else None

    def run(self, q, k, v, block_mask, scale, *, compile, need_lse, kernel_options):
        self.calls += 1
        if self.refuse:
            raise KernelRefused("no")
        return TritonKernel().run(q, k, v, block_mask, scale, compile=compile,
                                  need_lse=need_lse, kernel_options=kernel_options)


@pytest.mark.parametrize("refuse", [False, True])
def test_a_kernel_is_one_class_and_one_line(monkeypatch, refuse):
    q, k, v = _qkv()
    expected, _ = VideoAttention(G, density=0.3, sink=True, backend="flex")(q, k, v)
    kernel = _Counting(refuse)
    monkeypatch.setattr(kernels, "KERNELS", (kernel,) + kernels.KERNELS)
    out, report = VideoAttention(G, density=0.3, sink=True, backend="flex")(q, k, v)
    assert kernel.calls >= 1
    assert set(report["kernels"]) == ({"triton"} if refuse else {"counting"})
    np.testing.assert_array_equal(out.numpy(), expected.numpy())
