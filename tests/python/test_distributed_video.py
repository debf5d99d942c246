"""tilesplash.VideoAttention(group=...) on 2 and 3 local gloo ranks against one process.

Routing decisions (choice, the router's MSEs, density, tiles visited) must be
bit-identical to one process computing every head, with the report's heads
global and whole on every rank; outputs and LSEs equal within f32 rounding.
Uneven sequence shards (one empty) and head counts that do not divide by the
ranks included. Failures raise on every rank instead of hanging.
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

import dist_video_cases as cases  # noqa: E402
from dist_harness import run_ranks, values  # noqa: E402


@pytest.fixture(scope="module", params=[2, 3], ids=lambda w: f"{w}ranks")
def world_results(request):
    world = request.param
    return world, values(run_ranks(world, cases.run_video_cases, list(cases.VIDEO_CASES)))


def one_process(name):
    kwargs, calls, _ = cases.VIDEO_CASES[name]
    layer_attention = tilesplash.VideoAttention(cases.geometry(), threads=1, **kwargs)
    runs = []
    for i, (layer, step) in enumerate(calls):
        q, k, v = cases.video_inputs(name, i)
        out, lse, report = layer_attention(q, k, v, layer=layer, step=step, return_lse=True)
        runs.append((out.numpy(), lse.numpy(), cases.decisions(report),
                     float(v.abs().max())))
    if kwargs["method"] == "svg2":
        runs.append(cases.head_masks(layer_attention, range(cases.HEADS)))
    return runs


@pytest.mark.parametrize("name", list(cases.VIDEO_CASES))
def test_group_equals_one_process(world_results, name):
    world, per_rank = world_results
    expected = one_process(name)
    sizes = cases.VIDEO_CASES[name][2][world]
    if cases.VIDEO_CASES[name][0]["method"] == "svg2":
        # head_mask(h) takes global heads: each rank has the clusters one process
        # has for the heads it ran, and refuses the others.
        ref_masks = expected.pop()
        for rank in range(world):
            masks = per_rank[rank][name].pop()
            begin, end = distributed.head_range(cases.HEADS, rank, world)
            for h in range(cases.HEADS):
                if begin <= h < end:
                    assert np.array_equal(masks[h], ref_masks[h]), (rank, h)
                else:
                    assert masks[h] is None, (rank, h)
    for call, (ref_out, ref_lse, ref_heads, vmax) in enumerate(expected):
        for rank in range(world):
            _, _, heads, group = per_rank[rank][name][call]
            # Every rank reports every head, in global order, as one process decides.
            assert heads == ref_heads, (rank, call)
            assert group["rank"] == rank and group["size"] == world
            assert group["shards"] == sizes
            assert tuple(group["heads"]) == distributed.head_range(cases.HEADS, rank, world)
        batch = cases.BATCH.get(name, 1)
        assert [(h["batch"], h["head"]) for h in ref_heads] == [
            (b, h) for b in range(batch) for h in range(cases.HEADS)]
        out = np.concatenate([r[name][call][0] for r in per_rank], axis=1)
        lse = np.concatenate([r[name][call][1] for r in per_rank], axis=-1)
        assert out.shape == ref_out.shape and lse.shape == ref_lse.shape
        np.testing.assert_allclose(out, ref_out, rtol=0, atol=4e-6 * vmax)
        np.testing.assert_allclose(lse, ref_lse, rtol=1e-6, atol=1e-5)


def test_cases_route_and_differ_from_dense():
    # The cases must exercise routing: some heads routed, not every choice the same.
    runs = one_process("svg_routed")
    assert {h["choice"] for h in runs[0][2]} == {"dense"}  # layer 0: warm-up
    routed = [h for run in runs[1:] for h in run[2]]
    assert all(h["routed"] for h in routed) and all(h["mse"] for h in routed)
    assert len({h["choice"] for h in routed}) > 1, routed
    mix = one_process("mix_uneven")[0][2]
    assert len({h["choice"] for h in mix}) > 1, mix
    svg2 = [h["choice"] for run in one_process("svg2_warm")[1:-1] for h in run[2]]
    assert set(svg2) == {"svg2"}


@pytest.mark.parametrize("world,what", [(2, "nan"), (3, "heads")])
def test_rank_that_raises_fails_every_rank(world, what):
    results = values(run_ranks(world, cases.video_rank_raises, what, timeout=60))
    for rank, (kind, message, seconds) in enumerate(results):
        assert kind is not None, f"rank {rank}: no error"
        assert seconds < 15, (rank, seconds)  # promptly, not at the 20 s timeout
        if what == "nan":
            assert kind == "ValueError", (rank, kind, message)
            assert ("NaN" in message) if rank == world - 1 else (f"[{world - 1}]" in message)
        else:
            assert kind == "RuntimeError", (rank, kind, message)
            assert ("last rank's heads failed" in message), (rank, message)


def test_rank_that_exits_times_out():
    status, (kind, message, seconds) = run_ranks(2, cases.video_rank_exits, timeout=60)[0]
    assert status == "ok"
    assert kind in ("TimeoutError", "RuntimeError"), (kind, message)
    assert "tilesplash.VideoAttention" in message and seconds < 30


def test_group_needs_torch_distributed():
    # No process group initialized in the test process: a clear error, not a hang.
    layer_attention = tilesplash.VideoAttention(cases.geometry(), group=object(), samples=16)
    q, k, v = cases.video_inputs("svg_routed", 0)
    with pytest.raises(RuntimeError, match="not initialized"):
        layer_attention(q, k, v)
