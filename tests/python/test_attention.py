"""tilesplash.attention against a float64 NumPy reference: every mask kind x
layout x dtype, ragged lengths (neither a multiple of the tiles), the LSE, and
the output's type, dtype and layout."""

from __future__ import annotations

import numpy as np
import pytest

import tilesplash
from conftest import (DTYPES, LAYOUTS, check_against_reference, from_layout, lse_from_layout,
                      mask_matrix, numpy_dtype, random_qkv, to_layout)

GEOM = tilesplash.VideoGeometry(3, 3, 4)                                 # 36 tokens
GEOM_TEXT_BEFORE = tilesplash.VideoGeometry(3, 3, 4, text=5, text_at="before")  # 41
GEOM_TEXT_AFTER = tilesplash.VideoGeometry(4, 2, 3, text=7, text_at="after")    # 31

# (id, mask, lengths): generic masks run on ragged q x kv shapes; a video mask
# covers exactly its geometry's tokens.
RAGGED = [(37, 91), (70, 23)]
MASKS = [
    ("dense", tilesplash.Mask.dense(), RAGGED),
    ("causal", tilesplash.Mask.causal(), RAGGED),
    ("causal_offset", tilesplash.Mask.parse("causal:offset=10"), RAGGED),
    ("causal_negative_offset", tilesplash.Mask.causal(-5), RAGGED),  # first rows keep nothing
    ("local", tilesplash.Mask.local(5, 3), RAGGED),
    ("local_left_only", tilesplash.Mask.local(left=4), RAGGED),
    ("chunked", tilesplash.Mask.chunked(16), RAGGED),
    ("random", tilesplash.Mask.random(0.3, seed=7), RAGGED),
    ("or", tilesplash.Mask.parse("causal|local:left=2,right=20"), RAGGED),
    ("and", tilesplash.Mask.causal() & tilesplash.Mask.local(8, 8), RAGGED),
    ("spatial", tilesplash.Mask.spatial(GEOM, 7), [(36, 36)]),
    ("spatial_sink", tilesplash.Mask.spatial(GEOM, 5, sink=True), [(36, 36)]),
    ("spatial_text_before", tilesplash.Mask.spatial(GEOM_TEXT_BEFORE, 6, text_full=True), [(41, 41)]),
    ("temporal", tilesplash.Mask.temporal(GEOM, 4), [(36, 36)]),
    ("temporal_sink_text_after",
     tilesplash.Mask.temporal(GEOM_TEXT_AFTER, 3, sink=True, text_full=True), [(31, 31)]),
    ("spatial_or_temporal", tilesplash.Mask.spatial(GEOM, 3) | tilesplash.Mask.temporal(GEOM, 3),
     [(36, 36)]),
    ("spatial_density", tilesplash.Mask.spatial(GEOM, density=0.4, sink=True), [(36, 36)]),
]

CASES = [(name, mask, lens) for name, mask, all_lens in MASKS for lens in all_lens]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name,mask,lens", CASES, ids=[f"{c[0]}-{c[2][0]}x{c[2][1]}" for c in CASES])
def test_every_mask_layout_dtype(name, mask, lens, layout, dtype):
    q_len, kv_len = lens
    batch = 1 if layout == "hnd" else 2
    rng = np.random.default_rng(abs(hash((name, layout, dtype, lens))) % 2**32)
    q, k, v = random_qkv(rng, batch, 3, q_len, kv_len, 16, 24, dtype)
    spec_or_mask = str(mask) if name in ("causal", "local") else mask  # both forms
    out, lse = tilesplash.attention(to_layout(q, layout), to_layout(k, layout), to_layout(v, layout),
                                    mask=spec_or_mask, layout=layout, return_lse=True,
                                    block_q=16, block_kv=64)
    assert isinstance(out, np.ndarray) and out.dtype == numpy_dtype(dtype)
    assert out.shape == to_layout(np.empty((batch, 3, q_len, 24)), layout).shape
    assert out.flags.c_contiguous
    assert lse.dtype == np.float32
    assert lse.shape == ((3, q_len) if layout == "hnd" else (batch, 3, q_len))
    check_against_reference(from_layout(out, layout), lse_from_layout(lse, layout), q, k, v,
                            mask_matrix(mask, q_len, kv_len), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_default_tiles_and_larger_head_dims(dtype):
    rng = np.random.default_rng(1)
    for d, dv, q_len, kv_len in [(64, 64, 300, 520), (128, 64, 130, 257), (256, 8, 9, 70)]:
        q, k, v = random_qkv(rng, 1, 2, q_len, kv_len, d, dv, dtype)
        out = tilesplash.attention(q, k, v, mask="local:left=100,right=30")
        check_against_reference(out, None, q, k, v,
                                mask_matrix(tilesplash.Mask.local(100, 30), q_len, kv_len), dtype)


def test_scale_and_threads():
    rng = np.random.default_rng(2)
    q, k, v = random_qkv(rng, 2, 2, 50, 60, 32, 32)
    keep = mask_matrix(tilesplash.Mask.causal(3), 50, 60)
    for threads in (1, 2, 3):
        out = tilesplash.attention(q, k, v, mask="causal:offset=3", scale=0.3, threads=threads)
        check_against_reference(out, None, q, k, v, keep, "f32", scale=0.3)
    one = tilesplash.attention(q, k, v, threads=1)
    assert np.array_equal(one, tilesplash.attention(q, k, v, threads=2))  # bit-identical


def test_inputs_are_not_modified():
    rng = np.random.default_rng(3)
    q, k, v = random_qkv(rng, 1, 2, 20, 20, 8, 8)
    before = [x.copy() for x in (q, k, v)]
    tilesplash.attention(q, k, v, mask="causal")
    assert all(np.array_equal(a, b) for a, b in zip(before, (q, k, v)))


def test_plans_are_cached_across_calls():
    rng = np.random.default_rng(4)
    q, k, v = random_qkv(rng, 1, 2, 77, 77, 16, 16)
    mask = tilesplash.Mask.local(9, 9) | tilesplash.Mask.causal(-50)
    tilesplash.attention(q, k, v, mask=mask, block_q=16, block_kv=64)
    misses = tilesplash.plan_cache_stats()["misses"]
    for _ in range(3):
        tilesplash.attention(q, k, v, mask=str(mask), block_q=16, block_kv=64)  # equal mask, parsed
    stats = tilesplash.plan_cache_stats()
    assert stats["misses"] == misses and stats["hits"] >= 3


def test_works_with_numpy_alone():
    # The package needs only NumPy: with torch, ml_dtypes and diffusers made
    # unimportable, it still imports and runs attention and VideoAttention.
    import subprocess
    import sys

    code = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in ("torch", "ml_dtypes", "diffusers"):
            raise ImportError(name + " is blocked")
sys.meta_path.insert(0, Block())
import numpy as np, tilesplash
x = np.ones((1, 2, 8, 8), np.float32)
assert np.allclose(tilesplash.attention(x, x, x, mask="causal"), 1.0)
g = tilesplash.VideoGeometry(2, 2, 2)
y = np.ones((1, 8, 2, 8), np.float32)
out, report = tilesplash.VideoAttention(g, density=0.5)(y, y, y)
assert np.allclose(out, 1.0) and len(report["heads"]) == 2
assert not any(m.split(".")[0] in ("torch", "ml_dtypes") for m in sys.modules)
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
