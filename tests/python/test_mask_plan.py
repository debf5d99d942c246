"""tilesplash.Mask (constructors, |, &, ==, hash, str = SPEC, parse) and
tilesplash.plan (the CLI's JSON keys, tile kinds, the temporal substitution)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess

import numpy as np
import pytest

import tilesplash
from tilesplash import Mask

G = tilesplash.VideoGeometry(3, 4, 5, text=6, text_at="after")


def all_masks():
    return [
        Mask.dense(), Mask.causal(), Mask.causal(offset=-7), Mask.local(3, 9), Mask.local(left=5),
        Mask.local(right=2, offset=4), Mask.chunked(16), Mask.random(0.25, seed=3),
        Mask.spatial(G, 11), Mask.spatial(G, 4, sink=True, text_full=True),
        Mask.temporal(G, 6, sink=True), Mask.temporal(G, density=0.3),
        Mask.causal() | Mask.local(2, 2), (Mask.causal() | Mask.local(2, 2)) & Mask.local(9, 9),
        Mask.spatial(G, 5) | Mask.temporal(G, 5),
        Mask.radial(G, 0.2), Mask.radial(G, 1.5, block=4, sink=True), Mask.radial(G, density=0.6),
        Mask.sta(G, (1, 3, 1), tile=(2, 2, 3)), Mask.sta(G) | Mask.causal(),
    ]


@pytest.mark.parametrize("mask", all_masks(), ids=str)
def test_spec_round_trip_equality_and_hash(mask):
    again = Mask.parse(str(mask))
    assert again == mask and hash(again) == hash(mask) and str(again) == str(mask)
    assert pickle.loads(pickle.dumps(mask)) == mask
    assert all(mask.keeps(i, j) == again.keeps(i, j) for i in range(0, 70, 3) for j in range(0, 70, 2))


def test_operators_and_semantics():
    a, b = Mask.causal(), Mask.local(2, 2)
    assert (a | b) == Mask.parse("causal|local:left=2,right=2")
    assert (a & b) != (a | b)
    assert len({a, Mask.parse("causal"), b}) == 2
    for i in range(12):
        for j in range(12):
            assert (a | b).keeps(i, j) == (a.keeps(i, j) or b.keeps(i, j))
            assert (a & b).keeps(i, j) == (a.keeps(i, j) and b.keeps(i, j))
    assert Mask.chunked(4).keeps(5, 4) and not Mask.chunked(4).keeps(5, 3)
    assert (a == "causal") is False
    assert repr(a) == "tilesplash.Mask.parse('causal')"


def test_video_mask_equals_its_spec():
    assert Mask.spatial(G, 11, sink=True) == Mask.parse(f"spatial:{G},band=11,sink")
    assert str(Mask.temporal(G, 6)).startswith("temporal:")


CLI_KEYS = ["mask", "q_len", "kv_len", "block_q", "block_kv", "q_blocks", "kv_blocks", "full",
            "partial", "empty", "distinct_partial", "kept_pairs", "density", "plan_bytes",
            "build_seconds"]


def test_plan_golden_cases():
    causal = tilesplash.plan("causal", 64, block_q=16, block_kv=16)
    assert causal.kinds().dtype == np.uint8
    np.testing.assert_array_equal(causal.kinds(), [[1, 0, 0, 0], [2, 1, 0, 0], [2, 2, 1, 0],
                                                   [2, 2, 2, 1]])
    stats = causal.stats()
    assert list(stats) == CLI_KEYS
    assert stats["distinct_partial"] == 1 and stats["kept_pairs"] == 64 * 65 // 2
    local = tilesplash.plan(Mask.local(8, 8), 64, block_q=16, block_kv=16)
    assert local.stats()["distinct_partial"] == 3
    ragged = tilesplash.plan("dense", 100, 70, block_q=32, block_kv=64)
    assert ragged.kinds().shape == (4, 2) and (ragged.kinds() == 2).all()
    assert ragged.stats()["kept_pairs"] == 7000 and ragged.q_blocks == 4


def test_temporal_plan_is_the_token_major_band():
    mask = Mask.temporal(G, density=0.3, sink=True, text_full=True)
    plan = tilesplash.plan(mask, G.tokens, block_q=16, block_kv=64)
    stats = plan.stats()
    assert stats["plan_order"] == "token-major" and stats["plan_mask"].startswith("spatial:")
    assert stats["kept_pairs"] + stats["sink_kept_pairs"] == stats["mask_kept_pairs"]
    assert list(stats)[: len(CLI_KEYS)] == CLI_KEYS
    with pytest.raises(ValueError, match="q_len"):
        tilesplash.plan(mask, G.tokens - 1)


def test_plan_stats_match_the_cli():
    cli = os.environ.get("TILESPLASH_CLI")
    if not cli:
        pytest.skip("TILESPLASH_CLI not set (ctest sets it)")
    spec = "temporal:frames=6,height=5,width=7,text=13,text_at=after,density=0.3,sink"
    radial = "radial:frames=6,height=5,width=7,text=13,text_at=after,decay=0.5,block=8,sink"
    sta = "sta:frames=6,height=5,width=7,text=13,text_at=after,tile=2x2x4,window=1x3x1"
    for mask, q_len in [(spec, 223), ("causal|local:left=30,right=2", 300), (radial, 223),
                        (sta, 223)]:
        run = subprocess.run([cli, "plan", "--mask", mask, "--q-len", str(q_len), "--block-q", "16",
                              "--block-kv", "64", "--json"], capture_output=True, text=True, check=True)
        from_cli = json.loads(run.stdout)
        ours = tilesplash.plan(mask, q_len, block_q=16, block_kv=64).stats()
        assert list(ours) == list(from_cli)
        for key in ours:
            if key != "build_seconds":
                assert ours[key] == from_cli[key], key


def test_presets_and_geometry():
    presets = tilesplash.presets()
    wan = presets["wan2.1-1.3b-480p"]
    assert wan["geometry"] == tilesplash.VideoGeometry(21, 30, 52) and wan["geometry"].tokens == 32760
    assert wan["heads"] == 12 and wan["head_dim"] == 128
    assert presets["hunyuan-720p"]["geometry"].text_at == "after"
    g = tilesplash.VideoGeometry(2, 3, 4, text=5, text_at="before")
    assert (g.tokens, g.tokens_per_frame, g.video_tokens, g.text_tokens) == (29, 12, 24, 5)
    assert tilesplash.VideoGeometry.parse(str(g)) == g and hash(g) == hash(tilesplash.VideoGeometry.parse(str(g)))
    assert tilesplash.VideoGeometry.parse("preset=wan2.1-1.3b-480p") == wan["geometry"]
    assert pickle.loads(pickle.dumps(g)) == g
