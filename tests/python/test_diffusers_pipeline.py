"""Smoke test of examples/wan_pipeline.py: a whole WanPipeline loop with tilesplash, offline."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
pytest.importorskip("tilesplash.diffusers")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "wan_pipeline.py"


def load_example():
    spec = importlib.util.spec_from_file_location("wan_pipeline_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_wan_pipeline_example(capsys):
    example = load_example()
    # 9 frames of 96 x 96 (3 latent frames of 6 x 6 tokens), 5 steps: the smallest run that still
    # has a dense warm-up step, sparse steps and both CFG calls, twice (tilesplash, native).
    result = example.main(["--steps", "5", "--frames", "9", "--height", "96", "--width", "96", "--compare"])
    rows = result["rows"]
    assert result["dense_steps"] == 1  # 20% of 5 steps
    assert [row["step"] for row in rows] == list(range(5))
    layers, heads = 4, 4
    for row in rows:
        assert row["calls"] == 2 * layers  # classifier-free guidance: two transformer calls per step
        if row["step"] < result["dense_steps"]:
            assert row["dense"] == 2 * layers * heads
        else:
            assert row["dense"] == 2 * heads  # layer 0
            assert row["spatial"] + row["temporal"] == 2 * (layers - 1) * heads
    video = result["video"]
    assert video.shape == (1, 9, 96, 96, 3)
    assert torch.isfinite(video).all()
    assert result["cosine"] > 0.9
    out = capsys.readouterr().out
    assert "step  calls  dense  spatial  temporal" in out
    assert "against native attention" in out
