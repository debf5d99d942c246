"""tilesplash.diffusers.enable(..., process_group=) on 2 and 3 local gloo ranks.

Every rank calls the tiny random-weight Wan transformer with the same inputs;
each must return the output one process computes with the same settings
(forced dense, and routed sparse with the same per-head choices), including
a sequence that does not divide by the ranks, more ranks than heads, and
Wan 2.1 image-to-video (image tokens in cross-attention).
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

import tilesplash.diffusers as tsd  # noqa: E402

import dist_diffusers_cases as cases  # noqa: E402
from dist_harness import run_ranks, values  # noqa: E402
from diffusers_tiny import HEADS, run_wan, tiny_wan, wan_inputs  # noqa: E402


# 3 ranks only where they add something: a split that does not divide, more
# ranks than heads (each launch runs every listed case in one go).
WORLD_CASES = {2: ["dense", "routed", "i2v_routed"], 3: ["dense", "routed_uneven"]}


@functools.cache
def group_run(world):
    return values(run_ranks(world, cases.run_diffusers_cases, WORLD_CASES[world], timeout=300))


@functools.cache
def one_process(name):
    return cases.run_case(name)


@pytest.mark.parametrize("world,name", [(w, n) for w, names in WORLD_CASES.items() for n in names])
def test_group_equals_one_process(world, name):
    per_rank = group_run(world)
    expected_outs, expected_choices = one_process(name)
    for rank in range(world):
        outs, choices = per_rank[rank][name]
        # The same heads run the same masks at every layer and step.
        assert choices == expected_choices, rank
        for out, ref in zip(outs, expected_outs):
            assert out.shape == ref.shape
            # Linear layers on a shard sum in another order than on the whole sequence.
            np.testing.assert_allclose(out, ref, rtol=0, atol=2e-5 * np.abs(ref).max())


def test_cases_route_sparse():
    _, choices = one_process("routed")
    sparse = [c for _, _, heads in choices for _, _, c in heads if c != "dense"]
    assert len(sparse) == 2 * 2 * HEADS  # two sparse layers, two steps
    _, frames, _ = cases.DIFFUSERS_CASES["routed_uneven"]
    assert frames * 64 % 3 != 0  # the 3-rank run splits unevenly (and has more ranks than heads)


def test_group_output_differs_from_dense_when_routed():
    # Guards the comparison: the routed case's output is not the dense one.
    per_rank = group_run(2)
    routed, dense = per_rank[0]["routed"][0][0], per_rank[0]["dense"][0][0]
    assert np.abs(routed - dense).max() > 1e-3 * np.abs(dense).max()


def test_rank_that_fails_does_not_hang_the_others():
    results = run_ranks(2, cases.diffusers_rank_fails, timeout=120)
    status, value = results[0]
    assert status == "ok", value
    kind, message, seconds = value
    assert kind in ("TimeoutError", "RuntimeError"), (kind, message)
    assert "rank 0 of 2" in message and seconds < 60, (message, seconds)
    assert results[1][0] == "error" and "failed before the call" in results[1][1]


def test_unsupported_models_are_named():
    from diffusers import CogVideoXTransformer3DModel

    model = CogVideoXTransformer3DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4,
                                        out_channels=4, time_embed_dim=16, text_embed_dim=16,
                                        num_layers=1, sample_width=8, sample_height=8,
                                        sample_frames=5, patch_size=2, max_text_seq_length=4)
    with pytest.raises(NotImplementedError, match="CogVideoXTransformer3DModel"):
        tsd.enable(model, process_group=object())


def test_process_group_must_be_a_group():
    with pytest.raises(TypeError, match="ProcessGroup"):
        tsd.enable(tiny_wan(layers=1), process_group=object())

