"""tilesplash.distributed on 2 and 3 local gloo ranks against one process.

Each world size is launched once (a module fixture) and runs every case with
both schemes; the tests then compare the gathered shards, output and LSE,
against tilesplash.attention on the whole sequence in this process. Other
tests: determinism, skipped ring steps, and failures that must raise on every
rank instead of hanging.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

import tilesplash  # noqa: E402
from tilesplash import distributed  # noqa: E402

import dist_cases  # noqa: E402
from dist_harness import run_ranks, values  # noqa: E402

WORLDS = [2, 3]


@pytest.fixture(scope="module", params=WORLDS, ids=lambda w: f"{w}ranks")
def world_results(request):
    world = request.param
    return world, values(run_ranks(world, dist_cases.run_cases, list(dist_cases.CASES)))


def single_process(name):
    mask, _, _, _, _, layout, _, _ = dist_cases.CASES[name]
    q, k, v = dist_cases.make_inputs(name)
    out, lse = tilesplash.attention(q, k, v, mask=mask, layout=layout, return_lse=True, threads=1)
    return out.float().numpy(), lse.numpy(), float(v.float().abs().max())


@pytest.mark.parametrize("scheme", ["ulysses", "ring"])
@pytest.mark.parametrize("name", list(dist_cases.CASES))
def test_equals_one_process(world_results, name, scheme):
    world, per_rank = world_results
    layout, dtype = dist_cases.CASES[name][5], dist_cases.CASES[name][6]
    axis = dist_cases.seq_axis(layout)
    out = np.concatenate([r[(name, scheme)][0] for r in per_rank], axis=axis)
    lse = np.concatenate([r[(name, scheme)][1] for r in per_rank], axis=-1)
    ref_out, ref_lse, vmax = single_process(name)
    assert out.shape == ref_out.shape and lse.shape == ref_lse.shape
    # f32: the same kernel per head (Ulysses) or an exact LSE merge of window
    # plans (ring), so only f32 rounding; bf16: each ring step rounds its output.
    atol = (4e-6 if dtype == "f32" else 1e-2) * vmax
    np.testing.assert_allclose(out, ref_out, rtol=0, atol=atol)
    finite = np.isfinite(ref_lse)
    assert np.array_equal(np.isfinite(lse), finite)
    np.testing.assert_allclose(lse[finite], ref_lse[finite], rtol=1e-6, atol=1e-5)
    assert not np.isnan(out).any()


def test_uneven_cases_really_are_uneven():
    # The cases must exercise what they claim: shards and head splits of unequal size.
    for world in WORLDS:
        assert len(set(dist_cases.splits("dense", world))) > 1
        assert 0 in dist_cases.splits("local_ragged_split", 3)
        heads = dist_cases.CASES["dense"][2]
        split = [b - a for a, b in (distributed.head_range(heads, r, world)
                                     for r in range(world))]
        assert sum(split) == heads
    head_range = distributed.head_range
    assert [head_range(4, r, 3) for r in range(3)] == [(0, 1), (1, 2), (2, 4)]
    assert [head_range(2, r, 3) for r in range(3)] == [(0, 0), (0, 1), (1, 2)]


def test_same_call_twice_gives_the_same_bits():
    for same in values(run_ranks(2, dist_cases.determinism)):
        assert same == [True, True]


def test_ring_skips_the_steps_a_causal_mask_leaves_empty():
    # Under causal, rank r needs the K/V of ranks 0..r only: r + 1 window plans,
    # and each shard is sent only to the ranks after it.
    per_rank = values(run_ranks(3, dist_cases.ring_skips))
    assert [plans for plans, _ in per_rank] == [1, 2, 3]
    assert [posted for _, posted in per_rank] == [
        ["send", "send"], ["recv", "send"], ["recv", "recv"]]


@pytest.mark.parametrize("scheme", ["ulysses", "ring"])
@pytest.mark.parametrize("exits", [True, False], ids=["exits", "stays"])
def test_a_rank_that_raises_does_not_hang_the_others(scheme, exits):
    results = run_ranks(2, dist_cases.one_rank_raises, scheme, exits, timeout=60)
    assert results[1][0] == "error" and "rank 1 failed before the call" in results[1][1]
    status, (error, message, _seconds) = results[0]
    assert status == "ok", results[0]
    # A live peer that never calls: the 2 s timeout. A peer that exited: gloo
    # sees the closed connection (or the timeout, whichever comes first).
    assert error in (("TimeoutError", "RuntimeError") if exits else ("TimeoutError",)), (
        error, message)
    assert f"tilesplash.distributed.{scheme}_attention" in message
    assert "another rank" in message


@pytest.mark.parametrize("scheme", ["ulysses", "ring"])
@pytest.mark.parametrize("what, expected", [
    ("dtype", ["rejected their arguments", "q: dtype torch.float64 is not supported"]),
    ("mask", ["every rank must pass the same mask"]),
    ("heads", ["every rank must pass the same heads; by rank: [4, 4, 3]"]),
    ("video_length", ["its geometry has 60 tokens"]),
    ("nan", ["rejected their arguments", "q: NaN or Inf in this rank's shard"]),
    ("context", ["rejected their arguments", "context: expected a tilesplash.ThreadingContext"]),
])
def test_bad_argument_on_one_rank_raises_on_every_rank(scheme, what, expected):
    results = values(run_ranks(3, dist_cases.bad_argument_on_one_rank, scheme, what, timeout=60))
    for rank, (error, message) in enumerate(results):
        assert error in ("ValueError", "TypeError"), (rank, error, message)
        assert any(text in message for text in expected), (rank, message)


def test_not_initialized_is_a_clear_error():
    q = torch.zeros(1, 8, 2, 16)
    if dist.is_initialized():
        pytest.skip("this process already has a default process group")
    with pytest.raises(RuntimeError, match="torch.distributed is not initialized"):
        distributed.ulysses_attention(q, q, q)


def test_a_subgroup_of_ranks():
    per_rank = values(run_ranks(3, dist_cases.subgroup))
    assert per_rank[1] is None
    ref_out, ref_lse, vmax = single_process("causal")
    for scheme in ("ulysses", "ring"):
        out = np.concatenate([per_rank[r][scheme][0] for r in (0, 2)], axis=1)
        lse = np.concatenate([per_rank[r][scheme][1] for r in (0, 2)], axis=-1)
        np.testing.assert_allclose(out, ref_out, rtol=0, atol=4e-6 * vmax)
        np.testing.assert_allclose(lse, ref_lse, rtol=1e-6, atol=1e-5)


def test_exchange_round_trip_and_global_heads():
    per_rank = values(run_ranks(3, dist_cases.exchange_round_trip))
    assert [r[0] for r in per_rank] == [(0, 1), (1, 2), (2, 4)]
    assert all(r[1:] == (True, True, True) for r in per_rank)
