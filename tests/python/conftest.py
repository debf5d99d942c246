"""Shared fixtures of the Python suite: a float64 NumPy reference and helpers.

Run by ctest (PYTHONPATH=build/python, the package as built) or against an
installed package (`pip install .`, then pytest tests/python from anywhere).
"""

from __future__ import annotations

import importlib
import os
import pathlib
import sys

import numpy as np
import pytest

import tilesplash


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "gpu: needs a CUDA GPU (FlexAttention compiled to Triton); skipped, and "
        "reported as skipped, where none is present (pytest -m gpu runs only these)")


def _cuda_available() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    gpu = [item for item in items if "gpu" in item.keywords]
    if gpu and not _cuda_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU (none is present here)")
        for item in gpu:
            item.add_marker(skip)


def pytest_report_header(config):
    return f"tilesplash {tilesplash.__version__} from {os.path.dirname(tilesplash.__file__)}, isa {tilesplash.active_isa()}"


@pytest.fixture(scope="session", autouse=True)
def _imported_from_the_expected_place():
    # ctest tests the build tree and CI the installed wheel, never a stale copy.
    expected = os.environ.get("TILESPLASH_EXPECT_PACKAGE_IN")
    if expected:
        where = os.path.realpath(tilesplash.__file__)
        assert where.startswith(os.path.realpath(expected) + os.sep), (where, expected)


BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"


def import_bench(name: str):
    """bench/<name>.py as a module; the calling test skipped when bench/ is not beside
    the tests (an installed copy). bench/ is on sys.path only while importing: the
    scripts import their siblings (route_cli, block_models, block_timers)."""
    if not (BENCH / f"{name}.py").exists():
        pytest.skip("bench/ is not beside the tests (an installed copy)")
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))


def reference_attention(q, k, v, keep, scale=None):
    """float64 masked attention on [H, N, d] arrays; keep: bool [Nq, Nk]. Returns (out, lse)."""
    q = np.asarray(q, dtype=np.float64)
    k = np.asarray(k, dtype=np.float64)
    v = np.asarray(v, dtype=np.float64)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = scale * np.einsum("hqd,hkd->hqk", q, k)
    s = np.where(keep[None], s, -np.inf)
    m = s.max(-1, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m_safe)
    p = np.where(keep[None], p, 0.0)
    l = p.sum(-1, keepdims=True)
    out = np.where(l > 0, (p @ v) / np.where(l > 0, l, 1.0), 0.0)
    with np.errstate(divide="ignore"):
        lse = np.where(l[..., 0] > 0, m_safe[..., 0] + np.log(l[..., 0]), -np.inf)
    return out, lse


def mask_matrix(mask, q_len, kv_len):
    """The keep matrix of a tilesplash.Mask (small shapes only)."""
    return np.array([[mask.keeps(i, j) for j in range(kv_len)] for i in range(q_len)], dtype=bool)


DTYPES = ["f32", "f16", "bf16"]
LAYOUTS = ["bhnd", "bnhd", "hnd"]


def numpy_dtype(name):
    if name == "bf16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype({"f32": np.float32, "f16": np.float16}[name])


def tolerance(name):
    """Absolute tolerance per unit of max|V|: f32 accumulation; bf16 rounds P for
    P.V and the output to bf16; f16 rounds the output to f16."""
    return {"f32": 2e-6, "f16": 1e-3, "bf16": 6e-3}[name]


def to_layout(x, layout):
    """A canonical [B, H, N, d] array in `layout` (hnd needs B == 1)."""
    if layout == "bhnd":
        return np.ascontiguousarray(x)
    if layout == "bnhd":
        return np.ascontiguousarray(x.transpose(0, 2, 1, 3))
    assert x.shape[0] == 1
    return np.ascontiguousarray(x[0])


def lse_from_layout(lse, layout):
    """The LSE as [B, H, N]: hnd gives [H, N], the others [B, H, N] already."""
    return lse[None] if layout == "hnd" else lse


def from_layout(x, layout):
    """Back to canonical [B, H, N, d]."""
    if layout == "bhnd":
        return x
    if layout == "bnhd":
        return x.transpose(0, 2, 1, 3)
    return x[None]


def random_qkv(rng, batch, heads, q_len, kv_len, d, dv, dtype="f32"):
    """Canonical [B, H, N, d] inputs rounded to `dtype` (returned as that dtype)."""
    t = numpy_dtype(dtype)
    q = rng.standard_normal((batch, heads, q_len, d)).astype(np.float32).astype(t)
    k = rng.standard_normal((batch, heads, kv_len, d)).astype(np.float32).astype(t)
    v = rng.standard_normal((batch, heads, kv_len, dv)).astype(np.float32).astype(t)
    return q, k, v


def check_against_reference(out, lse, q, k, v, keep, dtype, scale=None):
    """out [B, H, Nq, dv] and lse [B, H, Nq] against the float64 reference."""
    vmax = float(np.abs(v.astype(np.float64)).max())
    for b in range(q.shape[0]):
        ref, ref_lse = reference_attention(q[b], k[b], v[b], keep, scale)
        np.testing.assert_allclose(out[b].astype(np.float64), ref, rtol=0,
                                   atol=tolerance(dtype) * max(vmax, 1e-30))
        if lse is not None:
            finite = np.isfinite(ref_lse)
            assert np.array_equal(np.isfinite(lse[b]), finite)
            assert np.all(lse[b][~finite] == -np.inf)
            np.testing.assert_allclose(lse[b][finite], ref_lse[finite], rtol=2e-6, atol=2e-5)
