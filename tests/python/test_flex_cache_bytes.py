"""The flex backend's BlockMask and plan-table caches are bounded in bytes (issue 34:
64 entries of ~110 MB each held 5-7 GB of GPU memory at Wan 720p)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import tilesplash.flex  # noqa: E402
from tilesplash._flex.masks import tensor_bytes  # noqa: E402


@pytest.fixture
def budget():
    saved = tilesplash.flex.cache_bytes()["budget"]
    tilesplash.flex.clear_caches()
    yield tilesplash.flex.set_cache_bytes
    tilesplash.flex.set_cache_bytes(saved)
    tilesplash.flex.clear_caches()


def test_the_default_budget_is_the_documented_one():
    assert tilesplash.flex.CACHE_BYTES == 256 << 20
    assert tilesplash.flex.cache_bytes()["budget"] == tilesplash.flex.CACHE_BYTES


def test_the_caches_stay_within_their_budget(budget):
    one = tensor_bytes(tilesplash.flex.block_mask("causal", 512, block_size=64))
    budget(3 * one)
    masks = [f"local:left={w},right=0" for w in range(8, 200, 8)]
    for spec in masks:
        tilesplash.flex.block_mask(spec, 512, block_size=64)
        held = tilesplash.flex.cache_bytes()
        assert held["block_masks"] <= 3 * one and held["tables"] <= 3 * one
    # The most recent masks are still cached (the same object comes back).
    last = tilesplash.flex.block_mask(masks[-1], 512, block_size=64)
    assert tilesplash.flex.block_mask(masks[-1], 512, block_size=64) is last


def test_an_entry_larger_than_the_budget_is_kept_alone(budget):
    budget(0)
    first = tilesplash.flex.block_mask("causal", 256, block_size=64)
    assert tilesplash.flex.block_mask("causal", 256, block_size=64) is first
    tilesplash.flex.block_mask("dense", 256, block_size=64)
    assert tilesplash.flex.cache_bytes()["block_masks"] == tensor_bytes(
        tilesplash.flex.block_mask("dense", 256, block_size=64))


def test_a_bad_budget_is_refused_by_name():
    with pytest.raises(ValueError, match="^budget: expected an int >= 0"):
        tilesplash.flex.set_cache_bytes(-1)
    with pytest.raises(ValueError, match="^budget"):
        tilesplash.flex.set_cache_bytes(1.5)
