"""The package imports and one call of each entry point works."""

import numpy as np

import tilesplash
from conftest import mask_matrix, reference_attention


def test_attention_matches_reference_causal():
    rng = np.random.default_rng(0)
    q = rng.standard_normal((2, 3, 40, 16)).astype(np.float32)
    k = rng.standard_normal((2, 3, 50, 16)).astype(np.float32)
    v = rng.standard_normal((2, 3, 50, 8)).astype(np.float32)
    out, lse = tilesplash.attention(q, k, v, mask="causal", return_lse=True)
    keep = mask_matrix(tilesplash.Mask.causal(), 40, 50)
    for b in range(2):
        ref, ref_lse = reference_attention(q[b], k[b], v[b], keep)
        np.testing.assert_allclose(out[b], ref, atol=2e-6, rtol=0)
        np.testing.assert_allclose(lse[b], ref_lse, atol=2e-6, rtol=0)
