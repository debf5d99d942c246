"""Defects of the flex backend found by issue 37's probe, each held by the case that
showed it: an empty batch or no heads through VideoAttention (item 2),
torch.compile(fullgraph=True) around tilesplash.attention(..., backend="flex")
(item 3) and tilesplash.flex.kernel_options given something that is not a
tensor (item 10)."""

from __future__ import annotations

import pytest

import tilesplash
from tilesplash import VideoAttention, VideoGeometry

torch = pytest.importorskip("torch")
import tilesplash.flex  # noqa: E402  (imports torch)

G = VideoGeometry(3, 5, 7)


@pytest.mark.parametrize("shape", [(0, 2), (1, 0), (0, 0)], ids=["no_batch", "no_heads", "none"])
@pytest.mark.parametrize("layout", ["bhnd", "bnhd"])
def test_video_attention_on_empty_input_gives_an_empty_output(shape, layout):
    batch, heads = shape
    dims = (batch, heads, G.tokens, 16) if layout == "bhnd" else (batch, G.tokens, heads, 16)
    q = torch.zeros(dims)
    for backend in ("cpu", "flex"):
        layer = VideoAttention(G, density=0.3, sink=True, backend=backend)
        out, report = layer(q, q, q, layout=layout)
        assert out.shape == q.shape and report["heads"] == []
        out, lse, report = layer(q, q, q, layout=layout, return_lse=True)
        assert out.shape == q.shape and tuple(lse.shape) == (batch, heads, G.tokens)
        assert report["heads"] == []


@pytest.mark.parametrize("mask", ["causal", tilesplash.Mask.local(5, 9)], ids=str)
@pytest.mark.parametrize("layout", ["bhnd", "bnhd"])
def test_fullgraph_compile_around_flex_attention_equals_eager(mask, layout):
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 72, 16) if layout == "bhnd" else torch.randn(1, 72, 2, 16)
               for _ in range(3))

    def f(q, k, v):
        return tilesplash.attention(q, k, v, mask=mask, layout=layout, backend="flex",
                                    return_lse=True)

    torch._dynamo.reset()
    compiled = torch.compile(f, fullgraph=True)(q, k, v)
    eager = f(q, k, v)
    assert torch.equal(compiled[0], eager[0]) and torch.equal(compiled[1], eager[1])


def test_fullgraph_compile_keeps_a_bad_spec_error():
    q = torch.randn(1, 2, 8, 16)

    def f(q):
        return tilesplash.attention(q, q, q, mask="no_such_mask", backend="flex")

    torch._dynamo.reset()
    with pytest.raises(ValueError, match="no_such_mask"):
        torch.compile(f, fullgraph=True)(q)


def test_kernel_options_names_q_when_it_is_not_a_tensor():
    with pytest.raises(TypeError, match=r"^q: expected a torch tensor"):
        tilesplash.flex.kernel_options("q")
    assert tilesplash.flex.kernel_options(torch.zeros(1, 2, 8, 16)) is None  # the CPU
