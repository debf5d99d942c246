"""Mask indices and window offsets at the ends of int64, through the Python API.

Indices are int64: a mask answers exactly anywhere in [-2^63, 2^63 - 1]
(offsets and indices of 2^62 and beyond used to be clamped to 2^61, so
causal(2^62) dropped pairs it keeps and classify() called full blocks
empty, and ring attention skipped their steps), and one past either end is
a ValueError naming the argument and the range, not a binding's
"incompatible function arguments". A window at the very top of the int64
index range computes what the same mask computes at the bottom.
"""

from __future__ import annotations

import numpy as np
import pytest

import tilesplash
from tilesplash import Mask

TOP = 2**63 - 1  # the largest index; ranges end at most here
BOTTOM = -(2**63)


def test_the_issue_example():
    mask = Mask.causal(2**62)
    assert mask.keeps(2**62, 0)
    assert mask.classify((2**62 - 16, 2**62), (0, 16)) == 2  # full: ring attention runs it
    assert mask.classify((0, 16), (2**62 - 8, 2**62 + 8)) == 1
    assert mask.classify((0, 16), (2**62 + 16, 2**62 + 32)) == 0


@pytest.mark.parametrize("offset", [BOTTOM, -(2**62) - 1, -(2**61), 2**61 + 1, 2**62, TOP])
def test_causal_and_local_keep_their_definition_everywhere(offset):
    causal = Mask.causal(offset)
    local = Mask.local(3, 2**62, offset=offset)
    for q in (BOTTOM, BOTTOM + 1, -(2**62), 0, 2**62, TOP - 1, TOP):
        for k in (BOTTOM, -(2**61), 0, 5, 2**62, TOP):
            assert causal.keeps(q, k) == (q + offset >= k), (offset, q, k)
            assert local.keeps(q, k) == (q + offset - 3 <= k <= q + offset + 2**62), (q, k)


def test_chunks_at_the_top():
    mask = Mask.chunked(2**62)
    assert mask.keeps(TOP, 2**62)  # the last chunk is [2^62, 2^63)
    assert not mask.keeps(TOP, 2**62 - 1)
    assert mask.classify((TOP - 4, TOP), (2**62, 2**62 + 4)) == 2
    assert mask.keeps(BOTTOM + 5, BOTTOM) and not mask.keeps(-1, -(2**62) - 1)


def test_one_past_int64_is_refused_by_name():
    mask = Mask.causal()
    assert mask.keeps(TOP, BOTTOM) and mask.classify((0, TOP), (TOP - 1, TOP)) == 1
    with pytest.raises(ValueError, match=r"q: expected an int in \[-2\^63, 2\^63 - 1\], got"):
        mask.keeps(TOP + 1, 0)
    with pytest.raises(ValueError, match=r"k: expected an int in \[-2\^63, 2\^63 - 1\]"):
        mask.keeps(0, BOTTOM - 1)
    with pytest.raises(ValueError, match=r"rows: expected 0 <= begin <= end <= 2\^63 - 1"):
        mask.classify((0, TOP + 1), (0, 1))
    with pytest.raises(ValueError, match=r"offset: expected an int in \[-2\^63, 2\^63 - 1\]"):
        Mask.causal(TOP + 1)
    with pytest.raises(ValueError, match=r"left: expected an int in \[0, 2\^63 - 1\]"):
        Mask.local(TOP + 1)


def qkv(n=16, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, 2, n, 8)).astype(np.float32) for _ in range(3)]


def test_a_window_at_the_top_of_int64_computes_the_local_mask():
    q, k, v = qkv()
    first = TOP - 16  # the window's rows [TOP - 16, TOP): the last 16 int64 indices
    # Global causal(-(first) + 5) keeps k <= q - first + 5: local row i keeps j <= i + 5.
    window = tilesplash.attention(q, k, v, mask=Mask.causal(5 - first), q_offset=first,
                                  q_total=TOP, kv_total=16)
    np.testing.assert_array_equal(window, tilesplash.attention(q, k, v, mask=Mask.causal(5)))
    p = tilesplash.plan(Mask.causal(5 - first), 16, 16, 16, 64, q_offset=first, q_total=TOP,
                        kv_total=16)
    assert p.window == (first, 0, TOP, 16)
    np.testing.assert_array_equal(p.kinds(), tilesplash.plan(Mask.causal(5), 16, 16, 16,
                                                             64).kinds())


def test_window_offsets_past_int64_are_refused_by_name():
    q, k, v = qkv()
    with pytest.raises(ValueError, match=r"q_offset: rows \[9223372036854775792, "
                                         r"9223372036854775808\) of this call pass the int64"):
        tilesplash.attention(q, k, v, q_offset=TOP - 15)
    with pytest.raises(ValueError, match=r"q_offset: .* expected q_offset <= 2\^63 - 1 - length"):
        tilesplash.attention(q, k, v, q_offset=TOP)
    with pytest.raises(ValueError, match=r"kv_offset: .* pass the int64 index range"):
        tilesplash.plan("causal", 4, 16, kv_offset=TOP - 15)
    with pytest.raises(ValueError, match=r"q_total: expected an int in \[1, 2\^63 - 1\]"):
        tilesplash.attention(q, k, v, q_total=TOP + 1)
    with pytest.raises(ValueError, match=r"q_offset: expected an int in \[0, 2\^63 - 1\]"):
        tilesplash.attention(q, k, v, q_offset=2**63)
