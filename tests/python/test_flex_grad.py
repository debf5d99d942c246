"""Inputs that require grad (issue 34, grad mode; issue 37, item 10).

Forward works on every backend; where no backward exists (the native kernel,
FlexAttention on CPU tensors) the output stays tied to the inputs and its
backward raises naming the backend, instead of a detached output that trains
nothing without a word. On a GPU, FlexAttention's backward needs the
BlockMask's q-block lists: they are built in grad mode (the GPU check runs the
backward against dense autograd)."""

from __future__ import annotations

import numpy as np
import pytest

import tilesplash
from tilesplash import VideoAttention, VideoGeometry

torch = pytest.importorskip("torch")
import tilesplash.flex  # noqa: E402

G = VideoGeometry(3, 4, 6, text=5, text_at="after")


@pytest.mark.parametrize("backend", ["cpu", "flex"])
@pytest.mark.parametrize("options", [dict(density=0.3, sink=True), dict(density=0.3, dense_layers=1),
                                     dict(method="svg2", density=0.3)],
                         ids=["routed", "warmup", "svg2"])
def test_forward_with_grad_works_and_backward_names_the_backend(backend, options):
    layer = VideoAttention(G, backend=backend, samples=8, **options)
    q, k, v = (torch.randn(1, G.tokens, 2, 16) for _ in range(3))
    expected, _, _ = layer(q, k, v, return_lse=True)
    for x in (q, k, v):
        x.requires_grad_(True)
    out, lse, report = layer(q, k, v, return_lse=True)
    assert out.requires_grad and len(report["heads"]) == 2
    np.testing.assert_allclose(out.detach().numpy(), expected.numpy(), atol=1e-6, rtol=0)
    with pytest.raises(RuntimeError, match=f"backend '{backend}' with cpu tensors has no "
                                           f"backward"):
        out.sum().backward()
    with torch.no_grad():  # no graph: nothing to refuse
        assert not layer(q, k, v)[0].requires_grad


def test_grad_mode_block_masks_carry_their_q_blocks():
    with torch.no_grad():
        inference = tilesplash.flex.block_mask("causal", 256, block_size=64)
    training = tilesplash.flex.block_mask("causal", 256, block_size=64)
    assert training.q_num_blocks is not None
    assert inference is not training


def test_flex_attention_on_cpu_with_grad_runs_and_refuses_backward():
    q, k, v = (torch.randn(1, 2, 64, 16, requires_grad=True) for _ in range(3))
    out = tilesplash.attention(q, k, v, mask="causal", backend="flex")
    assert out.requires_grad
    with pytest.raises(RuntimeError, match="backend 'flex' with cpu tensors has no backward"):
        out.sum().backward()
    with torch.no_grad():
        tilesplash.attention(q, k, v, mask="causal", backend="flex")
