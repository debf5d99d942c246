"""Shared fixtures of the Python suite: a float64 NumPy reference and helpers.

Run by ctest (PYTHONPATH=build/python, the package as built) or against an
installed package (`pip install .`, then pytest tests/python from anywhere).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import tilesplash


def pytest_report_header(config):
    return f"tilesplash {tilesplash.__version__} from {os.path.dirname(tilesplash.__file__)}, isa {tilesplash.active_isa()}"


@pytest.fixture(scope="session", autouse=True)
def _imported_from_the_expected_place():
    # ctest must test the build tree, not an older installed copy.
    if os.environ.get("TILESPLASH_EXPECT_BUILD_TREE"):
        path = os.environ["PYTHONPATH"].split(os.pathsep)[0]
        assert os.path.realpath(tilesplash.__file__).startswith(os.path.realpath(path))


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
