"""tilesplash.distributed with backend="flex" on 2 local gloo ranks (FlexAttention on
the CPU; on a GPU machine the same code moves CUDA tensors over NCCL): Ulysses and
ring attention equal one process running the native kernel, the ring's LSE
merges done in torch ops."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

import tilesplash  # noqa: E402

import dist_cases  # noqa: E402
from dist_harness import run_ranks, values  # noqa: E402

NAMES = ["local_ragged_split", "temporal_sink", "causal_bf16"]


@pytest.fixture(scope="module")
def per_rank():
    return values(run_ranks(2, dist_cases.run_flex_cases, NAMES))


@pytest.mark.parametrize("scheme", ["ulysses", "ring"])
@pytest.mark.parametrize("name", NAMES)
def test_flex_backend_equals_one_native_process(per_rank, name, scheme):
    mask, _, _, _, _, layout, dtype, _ = dist_cases.CASES[name]
    q, k, v = dist_cases.make_inputs(name)
    ref_out, ref_lse = tilesplash.attention(q, k, v, mask=mask, layout=layout, return_lse=True)
    axis = dist_cases.seq_axis(layout)
    out = np.concatenate([r[(name, scheme)][0] for r in per_rank], axis=axis)
    lse = np.concatenate([r[(name, scheme)][1] for r in per_rank], axis=-1)
    vmax = float(v.float().abs().max())
    atol = (4e-6 if dtype == "f32" else 1.6e-2) * vmax
    np.testing.assert_allclose(out, ref_out.float().numpy(), rtol=0, atol=atol)
    finite = np.isfinite(ref_lse.numpy())
    assert np.array_equal(np.isfinite(lse), finite)
    np.testing.assert_allclose(lse[finite], ref_lse.numpy()[finite], rtol=1e-6, atol=2e-5)
