"""svg2's top-p on the device without a bisection (issue 34, item 7).

The kept cluster pairs used to come from 50 rounds of bisecting top-p, about a
dozen launches each. select_pairs now reads the two density levels around the
target from one sorted cumsum; these tests hold it to the bisection it replaced
(kept here as the reference) on random, tied and clamped cases.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from tilesplash._torch_video.clusters import select_pairs  # noqa: E402


def _bisected(cq, ck, sizes_q, sizes_k, scale, density, min_kc_ratio, tokens, text):
    """The replaced code: select_pairs with top-p bisected 50 times."""
    heads, qc, kc = cq.shape[0], cq.shape[1], ck.shape[1]
    nonempty = sizes_k > 0
    logits = torch.log(sizes_k.double().clamp(min=1))[:, None, :] + scale * (
        cq.double() @ ck.double().transpose(1, 2))
    logits = logits.masked_fill(~nonempty[:, None, :], float("-inf"))
    weights = torch.softmax(logits, dim=-1)
    order = torch.sort(logits, dim=-1, descending=True, stable=True).indices
    cumulative = torch.cumsum(weights.gather(-1, order), dim=-1)
    width = nonempty.sum(-1)
    minimum = torch.clamp(torch.full_like(width, math.ceil(min_kc_ratio * kc - 1e-9)), min=1)
    minimum = torch.minimum(minimum, width)
    key_sizes = torch.cumsum(sizes_k.double()[:, None, :].expand(-1, qc, -1).gather(-1, order),
                             dim=-1)

    def prefix(p):
        reach = torch.searchsorted(cumulative, p[:, None, None].expand(-1, qc, 1).contiguous())
        return torch.minimum(torch.maximum(reach[..., 0] + 1, minimum[:, None]), width[:, None])

    n, t = float(tokens), float(text)

    def kept_density(p):
        m = prefix(p)
        keys = key_sizes.gather(-1, (m - 1).clamp(min=0)[..., None])[..., 0]
        return (2 * t * n - t * t + (sizes_q.double() * keys).sum(-1)) / (n * n)

    lo = torch.zeros(heads, dtype=torch.float64)
    hi = torch.ones_like(lo)
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        below = kept_density(mid) < density
        lo, hi = torch.where(below, mid, lo), torch.where(below, hi, mid)
    p = torch.where(density - kept_density(lo) <= kept_density(hi) - density, lo, hi)
    m = prefix(p)
    kept_sorted = torch.arange(kc)[None, None, :] < m[..., None]
    kept = torch.zeros((heads, qc, kc), dtype=torch.bool)
    return kept.scatter_(-1, order, kept_sorted)


def _case(seed, heads=3, qc=6, kc=9, d=8, empty=0):
    rng = np.random.default_rng(seed)
    cq = torch.from_numpy(rng.standard_normal((heads, qc, d)))
    ck = torch.from_numpy(rng.standard_normal((heads, kc, d)))
    sq = torch.from_numpy(rng.integers(1, 30, (heads, qc)))
    sk = torch.from_numpy(rng.integers(1, 30, (heads, kc)))
    if empty:
        sk[:, :empty] = 0
    return cq.float(), ck.float(), sq, sk


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("density", [0.02, 0.1, 0.3, 0.6, 0.95])
@pytest.mark.parametrize("min_kc_ratio", [0.0, 0.3])
def test_select_pairs_equals_the_bisection(seed, density, min_kc_ratio):
    cq, ck, sq, sk = _case(seed, empty=seed % 3)
    tokens = int(sq[0].sum()) + 7
    args = (cq, ck, sq, sk, 0.5 if seed % 2 else 3.0, density, min_kc_ratio, tokens, 7)
    assert torch.equal(select_pairs(*args), _bisected(*args))


def test_tied_weights_equal_the_bisection():
    # Equal centroids: every key cluster of a query cluster weighs the same.
    cq = torch.zeros(2, 4, 8)
    ck = torch.zeros(2, 6, 8)
    sq = torch.full((2, 4), 10)
    sk = torch.full((2, 6), 10)
    for density in (0.1, 0.25, 0.5, 0.9):
        args = (cq, ck, sq, sk, 1.0, density, 0.0, 40, 0)
        assert torch.equal(select_pairs(*args), _bisected(*args)), density


def test_no_loop_of_launches():
    """No 50 rounds of searchsorted: the prefix is searched at most a few times."""
    cq, ck, sq, sk = _case(0)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        select_pairs(cq, ck, sq, sk, 0.5, 0.3, 0.0, int(sq[0].sum()), 0)
    ops = [e.name for e in prof.events() if e.name.startswith("aten::searchsorted")]
    assert len(ops) <= 3, len(ops)
