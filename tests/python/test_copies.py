"""What the Python API hands out is the caller's to change.

Every value returned as a copy (reports, candidate lists, plan statistics and
tile kinds, the cache statistics, the presets) is a new object each call, so
editing it, however deeply, changes nothing the library keeps. Immutable
values (Mask, VideoGeometry) copy as themselves. A ThreadingContext copied
by copy.copy, copy.deepcopy or pickle is a new, independent context with the
same settings: it runs torch calls after the original is gone (a copy that
shared the original's handle failed then). The diffusers handle's report is
checked in test_diffusers.py (test_report_is_a_deep_copy).
"""

from __future__ import annotations

import copy
import gc
import pickle

import numpy as np
import pytest

import tilesplash
from tilesplash import VideoAttention, VideoGeometry

G = VideoGeometry(3, 2, 4, text=2, text_at="after")


def qkv(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, G.tokens, 2, 16)).astype(np.float32) for _ in range(3)]


def test_video_attention_reports_and_candidates_are_new_each_call():
    layer = VideoAttention(G, method="mix", density=0.5)
    candidates = layer.candidates
    candidates.append(("bogus", 1.0))
    assert ("bogus", 1.0) not in layer.candidates
    _, first = layer(*qkv())
    first["heads"][0]["choice"] = "edited"
    first["heads"].clear()
    _, second = layer(*qkv(), step=1)
    assert len(second["heads"]) == 2 and second["heads"][0]["choice"] != "edited"


def test_plan_stats_kinds_and_cache_stats_are_new_each_call():
    plan = tilesplash.plan("causal", 64, block_q=16, block_kv=16)
    kinds = plan.kinds()
    kinds[:] = 7
    assert plan.kinds().max() == 2
    stats = plan.stats()
    stats["full"] = -1
    assert plan.stats()["full"] == 6
    cache = tilesplash.plan_cache_stats()
    cache["capacity"] = -1
    assert tilesplash.plan_cache_stats()["capacity"] != -1
    presets = tilesplash.presets()
    name = next(iter(presets))
    presets[name]["edited"] = True
    presets.clear()
    assert "edited" not in tilesplash.presets()[name]


def test_immutable_values_copy_as_themselves():
    mask = tilesplash.Mask.causal(3)
    assert copy.copy(mask) is mask and copy.deepcopy(mask) is mask
    assert copy.deepcopy(G) == G and pickle.loads(pickle.dumps(G)) == G


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_threading_context_copies_are_independent(how):
    torch = pytest.importorskip("torch")
    original = tilesplash.ThreadingContext(2, pin=True, first_cpu=1)
    duplicate = {"copy": copy.copy, "deepcopy": copy.deepcopy,
                 "pickle": lambda c: pickle.loads(pickle.dumps(c))}[how](original)
    assert duplicate is not original
    assert (duplicate.threads, duplicate.pin, duplicate.first_cpu) == (2, True, 1)
    x = torch.randn(1, 2, 16, 8)
    expected = tilesplash.attention(x, x, x, mask="causal", context=original)
    del original
    gc.collect()
    assert torch.equal(tilesplash.attention(x, x, x, mask="causal", context=duplicate), expected)


def test_threading_context_copy_keeps_every_core_when_asked_for_zero():
    context = tilesplash.ThreadingContext(0)
    assert copy.copy(context).threads == tilesplash.hardware_threads() == context.threads
