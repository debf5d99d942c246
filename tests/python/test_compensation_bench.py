"""bench/compensation.py end to end at its tiny size through the CLI: both densities
measured, every sparse head compensated, compensation never making a head worse on
the smooth band heads, and its cost a share of the sparse time."""

from __future__ import annotations

import os
import pathlib

import pytest

from conftest import import_bench


def test_tiny_run_measures_both_densities():
    cli = os.environ.get("TILESPLASH_CLI")
    if not cli or not pathlib.Path(cli).exists():
        pytest.skip("TILESPLASH_CLI names no built CLI")
    bench = import_bench("compensation")
    result = bench.main(["--tiny", "--cli", cli, "--threads", "1", "--json"])
    assert set(result["densities"]) == {"0.25", "0.1"}
    for figures in result["densities"].values():
        assert len(figures["drop_errors"]) == len(figures["compensated_errors"]) == 2
        assert figures["compensated_heads"] == 2
        assert figures["worst_ratio"] <= 1.0
        assert 0.0 < figures["compensation_share"] < 1.0
