"""The building blocks of sequence parallelism, in one process.

tilesplash.merge_attention against a float64 NumPy evaluation of the merge
formula (every layout and dtype, -inf rows, rows that are -inf in every
part); attention over windows of a global mask (q_offset / kv_offset)
merged over split keys against the float64 reference of the whole mask;
Mask.classify and window plans against brute force; every bad argument.
"""

from __future__ import annotations

import numpy as np
import pytest

import tilesplash
from tilesplash import Mask

from conftest import (
    DTYPES,
    LAYOUTS,
    from_layout,
    lse_from_layout,
    mask_matrix,
    numpy_dtype,
    reference_attention,
    to_layout,
)

G = tilesplash.VideoGeometry(3, 4, 5, text=6, text_at="before")  # 66 tokens
N = G.frames * G.height * G.width + 6

GLOBAL_MASKS = [
    Mask.dense(), Mask.causal(), Mask.local(9, 4), Mask.chunked(16), Mask.random(0.3, seed=2),
    Mask.spatial(G, 11, sink=True, text_full=True), Mask.temporal(G, 3, sink=True),
    Mask.causal() | Mask.local(2, 2),
]


def random_parts(rng, parts, batch, heads, n, dim, dtype):
    """Canonical [B, H, N, d] outputs (f64 values rounded to dtype) and LSEs with -inf
    rows (NaN outputs there: ignored) and row 0 of head 0 -inf in every part."""
    outs, lses = [], []
    for _ in range(parts):
        out = rng.standard_normal((batch, heads, n, dim)).astype(np.float32).astype(
            numpy_dtype(dtype))
        lse = rng.uniform(-30, 30, (batch, heads, n)).astype(np.float32)
        lse[rng.random(lse.shape) < 0.2] = -np.inf
        lse[:, 0, 0] = -np.inf
        out = out.copy()
        out[np.isneginf(lse)] = np.nan
        outs.append(out)
        lses.append(lse)
    return outs, lses


def reference_merge(outs, lses):
    """The formula in float64: LSE = log sum exp(LSE_i), out = sum exp(LSE_i - LSE) out_i."""
    lse = np.stack([x.astype(np.float64) for x in lses])
    m = lse.max(0)
    safe = np.where(np.isfinite(m), m, 0.0)
    w = np.where(np.isneginf(lse), 0.0, np.exp(lse - safe))
    total = w.sum(0)
    acc = sum(w[i][..., None] * np.nan_to_num(outs[i].astype(np.float64)) for i in range(len(outs)))
    out = np.where(total[..., None] > 0, acc / np.where(total > 0, total, 1.0)[..., None], 0.0)
    with np.errstate(divide="ignore"):
        merged_lse = np.where(total > 0, safe + np.log(total), -np.inf)
    return out, merged_lse


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("parts", [1, 2, 4])
def test_merge_matches_the_float64_formula(layout, dtype, parts):
    rng = np.random.default_rng(parts * 7 + len(dtype))
    batch = 1 if layout == "hnd" else 2
    outs, lses = random_parts(rng, parts, batch, 3, 37, 16, dtype)
    out, lse = tilesplash.merge_attention([to_layout(x, layout) for x in outs],
                                          [lse[0] if layout == "hnd" else lse for lse in lses],
                                          layout=layout)
    assert out.dtype == outs[0].dtype and lse.dtype == np.float32
    ref, ref_lse = reference_merge(outs, lses)
    got = from_layout(out, layout).astype(np.float64)
    assert not np.isnan(got).any() and not np.isnan(lse).any()
    atol = {"f32": 1e-6, "f16": 1e-3, "bf16": 8e-3}[dtype] * np.abs(ref).max()
    np.testing.assert_allclose(got, ref, rtol=0, atol=atol)
    lse = lse_from_layout(lse, layout)
    assert np.array_equal(np.isneginf(lse), np.isneginf(ref_lse))
    assert (got[np.isneginf(ref_lse)] == 0).all()
    finite = np.isfinite(ref_lse)
    np.testing.assert_allclose(lse[finite], ref_lse[finite], rtol=1e-6, atol=1e-6)


def test_merge_torch_mixed_dtypes_and_result_dtype():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    outs, lses = random_parts(rng, 2, 1, 2, 9, 8, "f32")
    a = torch.from_numpy(outs[0])
    b = torch.from_numpy(outs[1]).to(torch.bfloat16)
    out, lse = tilesplash.merge_attention([a, b], [torch.from_numpy(x) for x in lses],
                                          dtype=torch.float32)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    ref, ref_lse = reference_merge([outs[0], b.float().numpy()], lses)
    np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=1e-6 * np.abs(ref).max())
    again, again_lse = tilesplash.merge_attention([a, b], [torch.from_numpy(x) for x in lses],
                                                  dtype=torch.float32)
    assert torch.equal(out, again) and torch.equal(lse, again_lse)


def split_key_attention(q, k, v, mask, q_range, cuts, layout="bhnd"):
    """Queries q_range of the global problem against key blocks, merged."""
    q0, q1 = q_range
    outs, lses = [], []
    for k0, k1 in zip(cuts[:-1], cuts[1:]):
        if mask.classify((q0, q1), (k0, k1)) == 0:
            continue
        out, lse = tilesplash.attention(q[:, :, q0:q1], k[:, :, k0:k1], v[:, :, k0:k1], mask=mask,
                                        layout=layout, return_lse=True, q_offset=q0, kv_offset=k0,
                                        q_total=q.shape[2], kv_total=k.shape[2], block_q=16,
                                        block_kv=64)
        outs.append(out)
        lses.append(lse)
    return tilesplash.merge_attention(outs, lses) if outs else None


@pytest.mark.parametrize("mask", GLOBAL_MASKS, ids=str)
def test_window_attention_over_split_keys_merges_to_the_whole_mask(mask):
    rng = np.random.default_rng(11)
    q, k, v = (rng.standard_normal((1, 2, N, 16)).astype(np.float32) for _ in range(3))
    keep = mask_matrix(mask, N, N)
    cuts = [0, 20, 21, 47, N]  # a one-key block, and blocks that straddle text and video
    for q_range in [(0, 30), (30, 31), (31, N)]:
        result = split_key_attention(q, k, v, mask, q_range, cuts)
        ref, ref_lse = reference_attention(q[0], k[0], v[0], keep)
        ref, ref_lse = ref[:, q_range[0]:q_range[1]], ref_lse[:, q_range[0]:q_range[1]]
        if result is None:  # every block skipped: no row keeps a key
            assert np.isneginf(ref_lse).all()
            continue
        out, lse = result
        np.testing.assert_allclose(out[0], ref, rtol=0, atol=4e-6 * np.abs(v).max())
        assert np.array_equal(np.isneginf(lse[0]), np.isneginf(ref_lse))
        finite = np.isfinite(ref_lse)
        np.testing.assert_allclose(lse[0][finite], ref_lse[finite], rtol=2e-6, atol=2e-5)


def test_window_attention_torch_equals_numpy_in_every_layout():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 2, 40, 16)).astype(np.float32) for _ in range(3))
    for layout in LAYOUTS:
        ql, kl, vl = (to_layout(x, layout) for x in (q[:, :, 10:25], k[:, :, 5:30], v[:, :, 5:30]))
        kw = dict(mask="causal", layout=layout, return_lse=True, q_offset=10, kv_offset=5,
                  q_total=40, kv_total=40)
        a, a_lse = tilesplash.attention(ql, kl, vl, **kw)
        b, b_lse = tilesplash.attention(*(torch.from_numpy(x) for x in (ql, kl, vl)), **kw)
        assert np.array_equal(a, b.numpy()) and np.array_equal(a_lse, b_lse.numpy())


@pytest.mark.parametrize("mask", GLOBAL_MASKS, ids=str)
def test_classify_and_window_plans_match_brute_force(mask):
    keep = mask_matrix(mask, N, N)
    rng = np.random.default_rng(4)
    for _ in range(60):
        q0, q1 = sorted(rng.integers(0, N + 1, 2))
        k0, k1 = sorted(rng.integers(0, N + 1, 2))
        block = keep[q0:q1, k0:k1]
        expected = 0 if not block.any() else (2 if block.all() else 1)
        assert mask.classify((q0, q1), (k0, k1)) == expected, (q0, q1, k0, k1)
        if q1 == q0 or k1 == k0:
            continue
        plan = tilesplash.plan(mask, q1 - q0, k1 - k0, 8, 8, q_offset=q0, kv_offset=k0,
                               q_total=N, kv_total=N)
        kinds = plan.kinds()
        for qb in range(kinds.shape[0]):
            for kb in range(kinds.shape[1]):
                tile = block[qb * 8:(qb + 1) * 8, kb * 8:(kb + 1) * 8]
                assert kinds[qb, kb] == (0 if not tile.any() else (2 if tile.all() else 1))
        assert plan.stats()["kept_pairs"] == block.sum()
        assert plan.mask == mask and plan.window == (q0, k0, N, N)


def test_whole_map_is_not_a_window():
    plan = tilesplash.plan("causal", 30, q_offset=0, kv_offset=0, q_total=30, kv_total=30)
    assert plan.window is None and plan.stats()["mask"] == "causal"


def test_bad_window_and_merge_arguments():
    x = np.zeros((1, 2, 10, 8), dtype=np.float32)
    with pytest.raises(ValueError, match=r"q_offset: expected an int in \[0, 2\^63 - 1\]"):
        tilesplash.attention(x, x, x, q_offset=-1)
    with pytest.raises(ValueError, match=r"kv_offset: rows \[5, 15\) .* kv_total = 12"):
        tilesplash.attention(x, x, x, kv_offset=5, kv_total=12)
    with pytest.raises(TypeError, match="q_total"):
        tilesplash.attention(x, x, x, q_total="20")
    video = Mask.spatial(G, 4)
    with pytest.raises(ValueError, match=f"its geometry has {N} tokens"):
        tilesplash.attention(x, x, x, mask=video, q_offset=10)  # q_total defaults to 20
    with pytest.raises(TypeError, match="rows: expected a \\(begin, end\\) pair"):
        Mask.causal().classify(3, (0, 1))
    with pytest.raises(ValueError, match="cols: expected 0 <= begin <= end"):
        Mask.causal().classify((0, 1), (5, 2))

    lse = np.zeros((1, 2, 10), dtype=np.float32)
    with pytest.raises(TypeError, match="outputs: expected a non-empty list"):
        tilesplash.merge_attention([], [])
    with pytest.raises(ValueError, match=r"lses: expected one LSE per output \(2\), got 1"):
        tilesplash.merge_attention([x, x], [lse])
    with pytest.raises(ValueError, match=r"outputs\[1\]: expected the shape of outputs\[0\]"):
        tilesplash.merge_attention([x, x[:, :, :5]], [lse, lse])
    with pytest.raises(TypeError, match=r"lses\[1\]: expected float32"):
        tilesplash.merge_attention([x, x], [lse, lse.astype(np.float64)])
    with pytest.raises(ValueError, match=r"lses\[0\]: expected shape \(1, 2, 10\)"):
        tilesplash.merge_attention([x, x], [lse[:, :1], lse])
    bad = lse.copy()
    bad[0, 1, 3] = np.nan
    with pytest.raises(ValueError, match=r"lses\[1\]: NaN at batch 0, head 1, row 3"):
        tilesplash.merge_attention([x, x], [lse, bad])
    bad[0, 1, 3] = np.inf
    with pytest.raises(ValueError, match=r"lses\[1\]: \+inf"):
        tilesplash.merge_attention([x, x], [lse, bad])
    nan_out = x.copy()
    nan_out[0, 0, 2, 1] = np.nan
    with pytest.raises(ValueError, match=r"outputs\[0\]: NaN or Inf at batch 0, head 0, row 2"):
        tilesplash.merge_attention([nan_out, x], [lse, lse])
    with pytest.raises(TypeError, match="dtype: expected float32, float16 or bfloat16"):
        tilesplash.merge_attention([x], [lse], dtype=np.int32)
    with pytest.raises(ValueError, match="layout"):
        tilesplash.merge_attention([x], [lse], layout="nhd")
