"""PyTorch: tensors in, tensors out (dtype and layout kept), the registered op
torch.ops.tilesplash.attention with its fake, and torch.compile of a model that
calls tilesplash.attention giving the eager result."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tilesplash  # noqa: E402
from conftest import check_against_reference, mask_matrix  # noqa: E402

TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def as_numpy64(x):
    return x.detach().to(torch.float64).numpy()


@pytest.mark.parametrize("dtype", list(TORCH_DTYPES))
@pytest.mark.parametrize("layout", ["bhnd", "bnhd", "hnd"])
def test_round_trip_keeps_type_dtype_and_layout(layout, dtype):
    g = torch.Generator().manual_seed(0)
    batch = 1 if layout == "hnd" else 2
    shape_q = {"bhnd": (batch, 2, 29, 16), "bnhd": (batch, 29, 2, 16), "hnd": (2, 29, 16)}[layout]
    shape_k = {"bhnd": (batch, 2, 70, 16), "bnhd": (batch, 70, 2, 16), "hnd": (2, 70, 16)}[layout]
    q, k, v = (torch.randn(s, generator=g).to(TORCH_DTYPES[dtype]) for s in (shape_q, shape_k, shape_k))
    out, lse = tilesplash.attention(q, k, v, mask="causal:offset=20", layout=layout, return_lse=True)
    assert isinstance(out, torch.Tensor) and out.dtype == q.dtype and out.shape == q.shape
    assert lse.dtype == torch.float32 and lse.shape == (
        (2, 29) if layout == "hnd" else (batch, 2, 29))
    canon = (lambda x: x) if layout == "bhnd" else (
        (lambda x: x.transpose(1, 2)) if layout == "bnhd" else (lambda x: x[None]))
    check_against_reference(as_numpy64(canon(out)), lse.numpy() if layout != "hnd" else lse.numpy()[None],
                            as_numpy64(canon(q)), as_numpy64(canon(k)), as_numpy64(canon(v)),
                            mask_matrix(tilesplash.Mask.causal(20), 29, 70), dtype)


def test_matches_torch_sdpa_and_numpy():
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 4, 50, 32, generator=g) for _ in range(3))
    keep = torch.ones(50, 50, dtype=torch.bool).tril()
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    out = tilesplash.attention(q, k, v, mask="causal")
    torch.testing.assert_close(out, ref, atol=2e-6, rtol=0)
    from_numpy = tilesplash.attention(q.numpy(), k.numpy(), v.numpy(), mask="causal")
    assert np.array_equal(out.numpy(), from_numpy)


def test_transposed_views_read_in_place():
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 40, 3, 16, generator=g) for _ in range(3))  # bnhd memory
    views = [x.transpose(1, 2) for x in (q, k, v)]                        # as bhnd
    out = tilesplash.attention(*views, mask="local:left=4,right=4", layout="bhnd")
    expected = tilesplash.attention(q, k, v, mask="local:left=4,right=4", layout="bnhd")
    assert torch.equal(out, expected.transpose(1, 2))
    sliced = torch.randn(2, 40, 3, 3, 16, generator=g)  # [B, N, 3, H, d]
    out = tilesplash.attention(sliced[:, :, 0], sliced[:, :, 1], sliced[:, :, 2], layout="bnhd")
    contiguous = [sliced[:, :, i].contiguous() for i in range(3)]
    assert torch.equal(out, tilesplash.attention(*contiguous, layout="bnhd"))


def test_registered_op_and_fake_shapes():
    assert hasattr(torch.ops.tilesplash, "attention")
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(2, 64, 3, 32, dtype=torch.bfloat16)
        k = torch.empty(2, 80, 3, 32, dtype=torch.bfloat16)
        v = torch.empty(2, 80, 3, 16, dtype=torch.bfloat16)
        out, lse = torch.ops.tilesplash.attention(q, k, v, "dense", "bnhd", None, None, None, 0)
        assert out.shape == (2, 64, 3, 16) and out.dtype == torch.bfloat16
        assert lse.shape == (2, 3, 64) and lse.dtype == torch.float32
    g = torch.Generator().manual_seed(3)
    q = torch.randn(1, 2, 16, 8, generator=g)
    torch.library.opcheck(torch.ops.tilesplash.attention.default,
                          (q, q.clone(), q.clone(), "causal", "bhnd", None, None, None, 0),
                          test_utils=("test_schema", "test_faketensor"))


class _Block(torch.nn.Module):
    def __init__(self, mask):
        super().__init__()
        self.proj = torch.nn.Linear(32, 96)
        self.mask = mask

    def forward(self, x):  # x [B, N, 32]
        q, k, v = self.proj(x).unflatten(-1, (3, 2, 16)).unbind(2)  # each [B, N, H, d] views
        return tilesplash.attention(q, k, v, mask=self.mask, layout="bnhd")


def test_torch_compile_gives_the_eager_result():
    torch.manual_seed(4)
    block = _Block(tilesplash.Mask.local(8, 8) | tilesplash.Mask.causal(-30)).eval()
    x = torch.randn(2, 70, 32)
    with torch.no_grad():
        eager = block(x)
        compiled = torch.compile(block, fullgraph=True)(x)
    assert torch.equal(compiled, eager)


# The documented forms (docs/python.md, the README): a SPEC string or a Mask,
# static and dynamic shapes, fullgraph on and off. Dynamo's "eager" backend
# traces exactly as inductor does (where fullgraph fails) at a fraction of the
# compile time; the test above runs inductor.
@pytest.mark.parametrize("fullgraph", [True, False])
@pytest.mark.parametrize("dynamic", [False, True])
@pytest.mark.parametrize("mask", ["local:left=8,right=8|causal:offset=-30",
                                  tilesplash.Mask.local(8, 8) | tilesplash.Mask.causal(-30)],
                         ids=["spec", "mask"])
def test_torch_compile_traces_strings_and_masks(mask, dynamic, fullgraph):
    torch._dynamo.reset()
    torch.manual_seed(5)
    block = _Block(mask).eval()
    compiled = torch.compile(block, fullgraph=fullgraph, dynamic=dynamic, backend="eager")
    with torch.no_grad():
        for n in (70, 45):  # a second length: a recompile, or the dynamic graph
            x = torch.randn(2, n, 32)
            assert torch.equal(compiled(x), block(x))


class _EveryArgument(torch.nn.Module):
    def forward(self, q, k, v, context):
        return tilesplash.attention(q, k, v, mask="causal", layout="bhnd", scale=0.3,
                                    return_lse=True, block_q=16, block_kv=64, threads=2,
                                    q_offset=3, kv_offset=0, q_total=40, kv_total=30,
                                    context=context)


def test_torch_compile_fullgraph_with_every_argument():
    torch._dynamo.reset()
    g = torch.Generator().manual_seed(6)
    q, k, v = (torch.randn(1, 2, n, 16, generator=g) for n in (20, 30, 30))
    context = tilesplash.ThreadingContext(2)
    module = _EveryArgument()
    compiled = torch.compile(module, fullgraph=True, backend="eager")
    with torch.no_grad():
        for got, want in zip(compiled(q, k, v, context), module(q, k, v, context)):
            assert torch.equal(got, want)


def test_torch_compile_bad_spec_names_the_mask():
    torch._dynamo.reset()
    x = torch.randn(1, 16, 2, 8)
    compiled = torch.compile(lambda t: tilesplash.attention(t, t, t, mask="bogus", layout="bnhd"),
                             fullgraph=True, backend="eager")
    with pytest.raises(ValueError, match="mask spec: unknown mask 'bogus'"):
        compiled(x)
    with pytest.raises(ValueError, match="mask spec: unknown mask 'bogus'"):
        tilesplash.attention(x, x, x, mask="bogus", layout="bnhd")


def _run(code):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_importing_tilesplash_does_not_import_torch():
    run = _run("import sys, tilesplash, numpy as np\n"
               "tilesplash.attention(*(np.ones((1, 1, 4, 8), np.float32),) * 3)\n"
               "assert 'torch' not in sys.modules, 'torch was imported'\n")
    assert run.returncode == 0, run.stderr


def test_op_registers_on_first_torch_call_when_torch_comes_later():
    run = _run("import tilesplash, torch\n"
               "x = torch.ones(1, 1, 4, 8)\n"
               "out = tilesplash.attention(x, x, x)\n"
               "assert torch.allclose(out, x) and hasattr(torch.ops.tilesplash, 'attention')\n")
    assert run.returncode == 0, run.stderr
