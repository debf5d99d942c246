"""NumPy inputs in the other byte order (astype(">f4")) give the right answer.

The core reads and writes native values only: every input in the other byte
order is converted on the way in, and every output is allocated in native
order and returned as the array the core wrote (never a converted copy that
the core wrote into and that was then dropped). Each entry point that
allocates an output from an input's dtype is checked: attention (every layout,
float32 and float16, mixed orders), VideoAttention, merge_attention (outputs,
LSEs and an explicit dtype in the other order) and kmeans (points, warm).
"""

from __future__ import annotations

import numpy as np
import pytest

import tilesplash
from tilesplash import Mask, VideoAttention, VideoGeometry

SHAPES = {"bhnd": (2, 2, 23, 16), "bnhd": (2, 23, 2, 16), "hnd": (2, 23, 16)}


def swapped(x: np.ndarray) -> np.ndarray:
    """The same values, stored in the other byte order."""
    other = x.dtype.newbyteorder("S")
    out = x.astype(other)
    assert not out.dtype.isnative and np.array_equal(out, x)
    return out


def qkv(layout, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(SHAPES[layout]).astype(dtype) for _ in range(3)]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("layout", list(SHAPES))
@pytest.mark.parametrize("which", ["q", "all", "k_v"])
def test_attention_gives_the_native_result(layout, dtype, which):
    q, k, v = qkv(layout, dtype)
    expected, expected_lse = tilesplash.attention(q, k, v, mask="causal", layout=layout,
                                                  return_lse=True)
    args = {"q": [swapped(q), k, v], "all": [swapped(q), swapped(k), swapped(v)],
            "k_v": [q, swapped(k), swapped(v)]}[which]
    out, lse = tilesplash.attention(*args, mask="causal", layout=layout, return_lse=True)
    assert out.dtype == np.dtype(dtype) and out.dtype.isnative
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(lse, expected_lse)


def test_attention_with_a_window_and_a_strided_view():
    q, k, v = qkv("bhnd", np.float32, seed=1)
    view = swapped(q)[:, :, ::2]
    expected = tilesplash.attention(q[:, :, ::2], k, v, mask=Mask.causal(), q_offset=4,
                                    q_total=30, kv_total=23)
    out = tilesplash.attention(view, swapped(k), v, mask=Mask.causal(), q_offset=4, q_total=30,
                               kv_total=23)
    assert out.dtype.isnative
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("method", ["svg", "svg2"])
def test_video_attention_gives_the_native_result(method):
    geometry = VideoGeometry(3, 2, 4, text=2, text_at="after")
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, geometry.tokens, 2, 16)).astype(np.float32)
               for _ in range(3))
    expected, expected_lse, _ = VideoAttention(geometry, method=method, density=0.5)(
        q, k, v, return_lse=True)
    out, lse, _ = VideoAttention(geometry, method=method, density=0.5)(
        swapped(q), swapped(k), swapped(v), return_lse=True)
    assert out.dtype.isnative
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(lse, expected_lse)


def test_merge_attention_gives_the_native_result():
    q, k, v = qkv("bhnd", np.float32, seed=3)
    parts = [tilesplash.attention(q, k[:, :, a:b], v[:, :, a:b], return_lse=True)
             for a, b in ((0, 10), (10, 23))]
    outs, lses = [p[0] for p in parts], [p[1] for p in parts]
    expected, expected_lse = tilesplash.merge_attention(outs, lses)
    for dtype in (None, ">f4", "<f4"):
        out, lse = tilesplash.merge_attention([swapped(outs[0]), outs[1]],
                                              [swapped(lses[0]), swapped(lses[1])], dtype=dtype)
        assert out.dtype == np.float32 and out.dtype.isnative, dtype
        np.testing.assert_array_equal(out, expected)
        np.testing.assert_array_equal(lse, expected_lse)
    out, _ = tilesplash.merge_attention(outs, lses, dtype=np.dtype(">f2"))
    assert out.dtype == np.float16 and out.dtype.isnative
    np.testing.assert_array_equal(out, expected.astype(np.float16))


@pytest.mark.parametrize("dtype", [">f4", ">f8", ">i4"])
def test_kmeans_reads_points_in_either_order(dtype):
    rng = np.random.default_rng(4)
    points = (rng.standard_normal((60, 8)) * 10).astype(np.dtype(dtype).newbyteorder("="))
    expected = tilesplash.kmeans(points, 5, seed=3)
    result = tilesplash.kmeans(points.astype(dtype), 5, seed=3,
                               warm=swapped(expected.centroids))
    warm_native = tilesplash.kmeans(points, 5, seed=3, warm=expected.centroids)
    for got, want in zip(result[:3], warm_native[:3]):
        assert got.dtype.isnative
        np.testing.assert_array_equal(got, want)
    cold = tilesplash.kmeans(points.astype(dtype), 5, seed=3)
    np.testing.assert_array_equal(cold.labels, expected.labels)
