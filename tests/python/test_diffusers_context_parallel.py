"""tilesplash.diffusers.enable under diffusers' own context parallelism, on 2 local gloo ranks.

``transformer.enable_parallelism(config=ContextParallelConfig(ulysses_degree=2))`` shards the
sequence by the model's ``_cp_plan``; tilesplash's backend is registered as context-parallel
capable and runs each rank's heads over the whole sequence (diffusers' Ulysses template). On
tiny Wan, LTX-Video, Helios (history tokens before the video) and ChronoEdit, dense and routed, the
output of every rank must equal one process's, and the ranks' heads together must make the
choices one process makes. The CPU shim is in dist_diffusers_cp_cases.py.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
pytest.importorskip("diffusers")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

import dist_diffusers_cp_cases as cases  # noqa: E402
from dist_harness import run_ranks, values  # noqa: E402

WORLD = 2
CASES = [(model, setting) for model in cases.INPUTS for setting in cases.SETTINGS]


@functools.cache
def parallel_run():
    return values(run_ranks(WORLD, cases.run_cp_cases, CASES, timeout=600))


@functools.cache
def one_process(model, setting):
    return cases.run_one(model, setting)


@pytest.mark.parametrize("model,setting", CASES)
def test_ulysses_equals_one_process(model, setting):
    expected, expected_choices = one_process(model, setting)
    per_rank = [ranks[(model, setting)] for ranks in parallel_run()]
    for rank, (out, _) in enumerate(per_rank):
        assert out.shape == expected.shape
        # Linear layers on a shard sum in another order than on the whole sequence.
        np.testing.assert_allclose(out, expected, rtol=0, atol=2e-5 * np.abs(expected).max(),
                                   err_msg=f"rank {rank}")
    # Each rank ran its share of the heads (Ulysses); together they choose as one process.
    assert sorted(c for _, rank_choices in per_rank for c in rank_choices) == expected_choices
    assert all(rank_choices for _, rank_choices in per_rank)
    if setting == "routed":
        assert {c[-1] for c in expected_choices} - {"dense"}


def test_tilesplash_enabled_before_enable_parallelism():
    expected, expected_choices = one_process(*cases.FIRST)
    per_rank = values(run_ranks(WORLD, cases.run_tilesplash_first, timeout=300))
    for out, _ in per_rank:
        np.testing.assert_allclose(out, expected, rtol=0, atol=2e-5 * np.abs(expected).max())
    assert sorted(c for _, rank_choices in per_rank for c in rank_choices) == expected_choices


def test_remove_gives_back_the_native_model_in_parallel():
    # enable() first, enable_parallelism second: remove() must leave diffusers' processors in
    # the context-parallel region, or the sharded model would attend its shard only.
    model = cases.BY_NAME["WanTransformer3DModel"].build()
    native = cases.run(model, cases.INPUTS["WanTransformer3DModel"](1, 3)).numpy()
    for out in values(run_ranks(WORLD, cases.remove_restores_native, timeout=300)):
        np.testing.assert_allclose(out, native, rtol=0, atol=2e-5 * np.abs(native).max())


def test_ring_is_refused_with_the_reason():
    for message in values(run_ranks(WORLD, cases.ring_is_refused, timeout=300)):
        assert "ring attention" in message and "ulysses_degree" in message, message
