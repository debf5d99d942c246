"""compensate=True through the Python front doors: tilesplash.attention against a
float64 definition (every empty tile of the plan added through its keys' mean key and
value), bit-identical when the plan skips nothing, the torch op the same as NumPy,
VideoAttention's report, diffusers' settings, and the refusals (non-bool; the flex
backend's compensation is tests/python/test_flex_compensation.py)."""

from __future__ import annotations

import numpy as np
import pytest

import tilesplash
from conftest import mask_matrix, reference_attention


def compensated_reference(q, k, v, keep, block_q, block_kv):
    """[H, N, d] float64: exact masked attention merged with every empty tile's term."""
    out, lse = reference_attention(q, k, v, keep)
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    nq, nk = keep.shape
    scale = 1.0 / np.sqrt(q.shape[-1])
    for h in range(q.shape[0]):
        for q0 in range(0, nq, block_q):
            rows = slice(q0, min(nq, q0 + block_q))
            skipped = [t0 for t0 in range(0, nk, block_kv)
                       if not keep[rows, t0:t0 + block_kv].any()]
            if not skipped:
                continue
            kbar = np.stack([k[h, t0:t0 + block_kv].mean(0) for t0 in skipped])
            vbar = np.stack([v[h, t0:t0 + block_kv].mean(0) for t0 in skipped])
            logw = scale * q[h, rows] @ kbar.T + np.log([min(block_kv, nk - t0) for t0 in skipped])
            top = np.maximum(lse[h, rows], logw.max(1))
            exact = np.exp(lse[h, rows] - top)
            w = np.exp(logw - top[:, None])
            total = exact + w.sum(1)
            out[h, rows] = (exact[:, None] * out[h, rows] + w @ vbar) / total[:, None]
            lse[h, rows] = top + np.log(total)
    return out, lse


def test_attention_matches_the_definition():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 200, 32)).astype(np.float32) for _ in range(3))
    mask = tilesplash.Mask.local(20, 20)
    out, lse = tilesplash.attention(q, k, v, mask=mask, layout="hnd", block_q=32, block_kv=64,
                                    compensate=True, return_lse=True)
    ref_out, ref_lse = compensated_reference(q, k, v, mask_matrix(mask, 200, 200), 32, 64)
    np.testing.assert_allclose(out, ref_out, atol=2e-5)
    np.testing.assert_allclose(lse, ref_lse, atol=2e-5)
    dropped = tilesplash.attention(q, k, v, mask=mask, layout="hnd", block_q=32, block_kv=64)
    assert np.abs(dropped - ref_out).max() > 1e-3  # the term is there


def test_nothing_skipped_is_bit_identical_and_torch_agrees():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, 2, 130, 16)).astype(np.float32) for _ in range(3))
    plain = tilesplash.attention(q, k, v, mask="dense")
    same = tilesplash.attention(q, k, v, mask="dense", compensate=True)
    assert np.array_equal(plain, same)
    spec = "local:left=10,right=10"
    a = tilesplash.attention(q, k, v, mask=spec, block_kv=64, compensate=True)
    b = tilesplash.attention(*(torch.from_numpy(x) for x in (q, k, v)), mask=spec, block_kv=64,
                             compensate=True)
    assert np.array_equal(a, b.numpy())


def test_video_attention_reports_compensated_heads():
    g = tilesplash.VideoGeometry(4, 4, 8)
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, 2, g.tokens, 16)).astype(np.float32) for _ in range(3))
    layer = tilesplash.VideoAttention(g, density=0.2, block_q=32, block_kv=64, compensate=True)
    _, report = layer(q, k, v, layout="bhnd")
    assert all(h["compensated"] for h in report["heads"])
    assert all(h["compensation_seconds"] >= 0.0 for h in report["heads"])


def test_refusals_name_the_argument():
    q = np.zeros((1, 64, 8), np.float32)
    with pytest.raises(TypeError, match="compensate"):
        tilesplash.attention(q, q, q, layout="hnd", compensate="yes")
    with pytest.raises(TypeError, match="compensate"):  # flex compensates too, checked alike
        tilesplash.VideoAttention(tilesplash.VideoGeometry(2, 4, 8), backend="flex",
                                  compensate=1)


def test_diffusers_settings_pass_it_on():
    from tilesplash.diffusers._runtime import Settings

    settings = Settings(method="svg", density=0.25, density_budget=None, sink=None,
                        dense_layers=0, dense_steps=0, dense_last_steps=0, total_steps=None,
                        force=None, samples=8, threads=0, compensate=True)
    assert settings.video_attention_kwargs(False)["compensate"] is True
