"""bench/error_target.py: its lower bound on the mean density is the exact least
density of any one-candidate-per-head choice (checked against enumeration), and the
whole bench runs end to end at a tiny size through the CLI."""

from __future__ import annotations

import itertools
import os
import pathlib
import random

import pytest

from conftest import import_bench


@pytest.fixture(scope="module")
def bench():
    return import_bench("error_target")


def enumerate_least(errors, goal):
    best = float("inf")
    for choice in itertools.product(*[list(h.items()) for h in errors]):
        if sum(e for _, e in choice) <= len(errors) * goal:
            best = min(best, sum(d for d, _ in choice) / len(errors))
    return best


@pytest.mark.parametrize("seed", range(16))
def test_bound_is_the_least_density_of_any_choice(bench, seed):
    rng = random.Random(seed)
    densities = [0.05, 0.1, 0.15, 0.25, 0.4]
    # Errors fall as density grows, as on the band heads; some heads are flat.
    errors = []
    for _ in range(rng.randint(1, 5)):
        e = rng.uniform(0.01, 0.5)
        head = {}
        for d in densities:
            head[d] = e
            e *= rng.uniform(0.2, 1.0)
        errors.append(head)
    goal = rng.uniform(0.001, 0.3)
    if seed % 2:  # a goal met exactly by one choice: the edge of the budget
        goal = sum(rng.choice(list(h.values())) for h in errors) / len(errors)
    exact = enumerate_least(errors, goal)
    bound = bench.least_mean_density(errors, goal, units=20000)
    assert bound <= exact + 1e-12  # a lower bound: never above the exact least
    # and tight up to the cut of the budget: the exact least at a budget larger
    # by one unit per head is no lower than the bound.
    looser = enumerate_least(errors, goal * (1 + len(errors) / 20000) + 1e-12)
    assert bound >= looser - 1e-12


def test_head_errors_take_the_least_error_over_families(bench):
    probe = {"heads": [
        {"routed": True, "error": 0.1, "choice": "spatial@0.1",
         "mse": {"spatial@0.1": 0.01, "temporal@0.1": 0.04, "spatial@0.2": 0.0004,
                 "temporal@0.2": 0.0001}},
        {"routed": False, "error": None, "choice": "dense", "mse": {}},
    ], "candidates": [{"name": f"{family}@{rung}", "rung": rung}
                      for rung in (0.1, 0.2) for family in ("spatial", "temporal")]}
    (head,) = bench.head_errors(probe)  # the unrouted head is left out
    assert head == pytest.approx({0.1: 0.1, 0.2: 0.01})


def test_bench_runs_end_to_end(bench, capsys):
    cli = os.environ.get("TILESPLASH_CLI")
    if not cli or not pathlib.Path(cli).exists():
        pytest.skip("TILESPLASH_CLI names no built CLI")
    result = bench.main(["--cli", cli, "--geometry", "frames=4,height=8,width=8",
                         "--heads", "4", "--threads", "1"])
    assert 0.0 < result["density_ratio"] <= 1.6
    bound = result["least_density_ratio"]
    # The rule's choice is one of the choices the bound ranges over, at a
    # mean error not above the goal, so the bound is never above it.
    assert bound["ladder"] <= result["density_ratio"] + 1e-9
    assert 0.0 < bound["fine_ladder"] and 0.0 < bound["ladder"]
    assert "bound: the least mean density" in capsys.readouterr().out


def test_bench_runs_compensated(bench):
    cli = os.environ.get("TILESPLASH_CLI")
    if not cli or not pathlib.Path(cli).exists():
        pytest.skip("TILESPLASH_CLI names no built CLI")
    result = bench.main(["--cli", cli, "--geometry", "frames=4,height=8,width=8",
                         "--heads", "4", "--threads", "1", "--compensate", "--json"])
    assert result["compensate"] is True
    # The bound ranges over the compensated candidates' choices, the run's among them.
    assert 0.0 < result["density_ratio"] <= 1.6
    assert result["density_over_bound"] >= 1.0 - 1e-9
