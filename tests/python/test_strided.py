"""Strided views: transposes of another layout and slices of packed buffers are
read in place; broadcast, reversed or gapped rows are packed first. Either
way the result equals the contiguous call bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import tilesplash
from tilesplash import _core
from tilesplash._tensors import numpy_desc
from conftest import random_qkv


def in_place(x, layout):
    desc, _ = numpy_desc(x, "x")
    return _core.reads_in_place(desc, layout)


def contiguous_call(q, k, v, layout, **kw):
    return tilesplash.attention(*(np.ascontiguousarray(x) for x in (q, k, v)), layout=layout, **kw)


@pytest.fixture
def qkv():
    return random_qkv(np.random.default_rng(5), 2, 3, 33, 45, 16, 16)


def test_transpose_of_the_other_layout_is_read_in_place(qkv):
    q, k, v = qkv  # [B, H, N, d] contiguous
    bnhd = [np.ascontiguousarray(x.transpose(0, 2, 1, 3)) for x in (q, k, v)]
    as_bhnd = [x.transpose(0, 2, 1, 3) for x in bnhd]  # bhnd views of bnhd memory
    assert all(in_place(x, "bhnd") for x in as_bhnd)
    assert not as_bhnd[0].flags.c_contiguous
    out = tilesplash.attention(*as_bhnd, mask="causal", layout="bhnd")
    assert np.array_equal(out, tilesplash.attention(q, k, v, mask="causal", layout="bhnd"))
    as_bnhd = [x.transpose(0, 2, 1, 3) for x in (q, k, v)]  # bnhd views of bhnd memory
    assert all(in_place(x, "bnhd") for x in as_bnhd)
    out = tilesplash.attention(*as_bnhd, mask="causal", layout="bnhd")
    assert np.array_equal(out.transpose(0, 2, 1, 3), tilesplash.attention(q, k, v, mask="causal"))


def test_slices_of_a_packed_qkv_buffer_are_read_in_place():
    rng = np.random.default_rng(6)
    qkv = rng.standard_normal((2, 40, 3, 4, 16)).astype(np.float32)  # [B, N, 3, H, d]
    q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
    assert all(in_place(x, "bnhd") for x in (q, k, v))
    out = tilesplash.attention(q, k, v, mask="local:left=3,right=3", layout="bnhd")
    assert np.array_equal(out, contiguous_call(q, k, v, "bnhd", mask="local:left=3,right=3"))


@pytest.mark.parametrize("make", [
    pytest.param(lambda x: x[:, :, ::-1], id="reversed_rows"),
    pytest.param(lambda x: np.broadcast_to(x[:, :1], x.shape), id="heads_broadcast"),
    pytest.param(lambda x: np.broadcast_to(x[:, :, :1], x.shape), id="rows_broadcast"),
    pytest.param(lambda x: np.repeat(x, 2, axis=-1)[..., ::2], id="gapped_elements"),
    pytest.param(lambda x: np.asfortranarray(x), id="fortran_order"),
])
def test_views_the_kernel_cannot_read_are_packed(qkv, make):
    q, k, v = qkv
    views = [make(x) for x in (q, k, v)]
    assert not in_place(views[1], "bhnd")
    out, lse = tilesplash.attention(*views, mask="causal", return_lse=True)
    ref, ref_lse = contiguous_call(*views, "bhnd", mask="causal", return_lse=True)
    assert np.array_equal(out, ref) and np.array_equal(lse, ref_lse)


def test_byte_strides_that_are_not_whole_elements():
    rng = np.random.default_rng(7)
    raw = np.zeros(8192, np.uint8)
    odd = np.ndarray((1, 3, 20, 16), np.float32, raw.data, offset=2,
                     strides=(4096, 20 * 16 * 4 + 2, 64, 4))  # heads 1282 bytes apart
    odd[...] = rng.standard_normal(odd.shape)
    same = np.array(odd)
    out = tilesplash.attention(odd, odd, odd, mask="causal")
    assert np.array_equal(out, tilesplash.attention(same, same, same, mask="causal"))
