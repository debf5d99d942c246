"""bench/flex_strategies.py runs (its --tiny dry run): it once called merge_lse with an
old signature and nothing noticed (issue 37)."""

from __future__ import annotations

import pytest

from conftest import import_bench

pytest.importorskip("torch")


def test_flex_strategies_tiny_dry_run(capsys):
    bench = import_bench("flex_strategies")
    results = bench.main(["--tiny"])
    for label in ("temporal", "sta"):
        case = results[label]
        assert case["per_head"]["seconds"] > 0 and case["permute"]["seconds"] > 0
    assert '"temporal"' in capsys.readouterr().out
