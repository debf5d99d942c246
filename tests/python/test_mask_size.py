"""Masks of many terms: Mask.any_of / all_of, long SPEC chains, and the limits.

That parsing and any_of store each term once (no quadratic copy) is checked
in C++ by counting the children the OR / AND nodes store
(tests/mask_combine_test.cc); here: the Python API gives the same masks as
the pairwise operators, long chains round-trip, and the limits are refused
by name where a mask is built.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import tilesplash
from tilesplash import Mask


def keep_matrix(mask, n=12):
    return np.array([[mask.keeps(q, k) for k in range(n)] for q in range(n)])


def test_any_of_and_all_of_equal_the_operators():
    masks = [Mask.causal(), Mask.local(2, 3), Mask.chunked(4)]
    assert Mask.any_of(masks) == masks[0] | masks[1] | masks[2]
    assert Mask.all_of(masks) == masks[0] & masks[1] & masks[2]
    assert np.array_equal(keep_matrix(Mask.any_of(masks)),
                          keep_matrix(masks[0]) | keep_matrix(masks[1]) | keep_matrix(masks[2]))
    assert np.array_equal(keep_matrix(Mask.all_of(masks)),
                          keep_matrix(masks[0]) & keep_matrix(masks[1]) & keep_matrix(masks[2]))
    # SPEC strings and any iterable; one mask is itself.
    assert Mask.any_of(iter(["causal", "local:left=2,right=3"])) == masks[0] | masks[1]
    assert Mask.any_of([masks[1]]) == masks[1]
    assert str(Mask.any_of([masks[0] | masks[1], masks[2]])) == (
        "causal|local:left=2,right=3|chunked:size=4")


@pytest.mark.parametrize("bad, error, text", [
    ([], ValueError, "masks: Mask.any_of needs at least one mask"),
    ("causal", TypeError, "masks: Mask.any_of takes an iterable of masks, got one str"),
    (Mask.causal(), TypeError, "got one Mask"),
    (3, TypeError, "masks: Mask.any_of takes an iterable"),
    ([Mask.causal(), 3], TypeError, "mask: expected a SPEC string or a tilesplash.Mask"),
    (["causal", "nope"], ValueError, "unknown mask 'nope'"),
])
def test_any_of_refuses_bad_input_by_name(bad, error, text):
    with pytest.raises(error, match=text.replace("(", r"\(").replace(")", r"\)")):
        Mask.any_of(bad)


@pytest.mark.parametrize("op", ["|", "&"])
def test_a_long_chain_parses_to_one_node_and_back(op):
    terms = [f"causal:offset={i}" for i in range(1, 20_001)]
    spec = op.join(terms)
    mask = Mask.parse(spec)
    assert str(mask) == spec
    built = (Mask.any_of if op == "|" else Mask.all_of)(Mask.causal(i) for i in range(1, 20_001))
    assert mask == built and hash(mask) == hash(built)
    assert pickle.loads(pickle.dumps(mask)) == mask
    expected = (lambda q, k: q + 20_000 >= k) if op == "|" else (lambda q, k: q + 1 >= k)
    assert all(mask.keeps(q, k) == expected(q, k)
               for q in (0, 5) for k in (0, 1, 2, 6, 7, 20_000, 20_001, 20_005, 20_006))


def test_alternating_operators_nest_at_most_64_deep():
    mask = Mask.causal()
    for level in range(1, 65):
        mask = (mask | Mask.causal(level)) & Mask.local(level, level)
    # At the limit the SPEC still parses back (64 levels of brackets), and pickles.
    assert str(mask).count("(") == 64
    assert Mask.parse(str(mask)) == mask
    assert pickle.loads(pickle.dumps(mask)) == mask
    with pytest.raises(ValueError, match="mask: ORs inside ANDs nest 65 deep, more than 64"):
        (mask | Mask.dense()) & Mask.causal()
    with pytest.raises(ValueError, match="nested deeper than 64"):
        Mask.parse("(" * 65 + "causal" + ")" * 65)


def test_a_mask_of_more_than_2_to_the_20_terms_is_refused():
    half = Mask.any_of([Mask.causal()] * 2**19)  # one node shared 2^19 times: cheap
    both = half & half  # 2^20 terms: the limit
    assert both.keeps(3, 2) and not both.keeps(2, 3)
    with pytest.raises(ValueError, match="mask: 1048577 terms, more than 1048576"):
        both & Mask.dense()


def test_attention_runs_a_long_chain_as_the_one_term_it_amounts_to():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 1, 40, 16)).astype(np.float32) for _ in range(3))
    chain = "|".join(["causal"] * 5000)
    out = tilesplash.attention(q, k, v, mask=chain, threads=1)
    ref = tilesplash.attention(q, k, v, mask="causal", threads=1)
    np.testing.assert_array_equal(out, ref)
