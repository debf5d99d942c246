#!/usr/bin/env python3
"""Error target against one density, same run: `tilesplash route` on the band workload.

The workload is planted_band_options (tilesplash/workload.h): heads whose
attention sits in a band of 3% to 40% of the keys, spatial and temporal
alternating. Three routed runs of the same heads on the CPU kernel:

  1. density 0.25, two candidates (Sparse VideoGen's spatial and temporal
     pair): the reference layer time, mean sampled error and routing time;
  2. --error E, the default 5-step ladder (10 candidates), with E chosen so
     that the mean sampled error over the heads equals run 1's: a probe run
     at E = run 1's mean error gives every head's sampled error of every
     rung, and the library's own rule (_core.decide_routes) finds offline the
     largest E whose choices keep the mean at run 1's; then the timed run:
     mean density, layer time, routing time;
  3. run 1 again, last, so that a change of load shows as a change of
     run 1's time (printed as "drift").

Then the bound: from the sampled errors of every candidate of the default
ladder and of a fine one (2% to 60%, 16 rungs; one more probe run), the least
mean density that *any* choice of one candidate per head reaches with the
mean sampled error <= run 1's (an exact knapsack over the heads, not the
library's rule). When that bound is above half of 0.25, no per-head choice
on this workload meets the density goal, whatever the rule.

With --compensate, runs 2 and the probes compensate what they skip
(docs/masks.md) while run 1 stays drop-only: the goal is then run 1's error
at a mean density <= 0.125 (0.5 of 0.25) and a layer >= 1.6x faster, and the
bound is that of the compensated candidates.

Printed: mean density of 2 over 1 (goal <= 0.5), run 2's mean density over
the bound on its own ladder (goal <= 1.1, drop-only), layer speed-up 1 / 2 (the
layer: routing and attention; goal >= 1.6) and the attention's alone, routing
time 2 / 1 (goal <= 1.5) and routing's share of run 2's layer (goal <= 0.10).
Times are the CLI's medians of --repeats runs after a warm-up run. The
machine must be quiet (docs/kernel.md):

    PYTHONPATH=build/python python bench/error_target.py   # 720p (Wan 2.1 14B), 8 heads
    python bench/error_target.py --heads 4 --preset wan2.1-1.3b-480p
    python bench/error_target.py --geometry frames=8,height=16,width=16 --heads 8  # a quick check
    python bench/error_target.py --compensate     # the error target with compensation
    python bench/error_target.py --samples 64     # 64 rows at every size (before the row rule)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from route_cli import route_json


def route(cli, shape, heads, threads, repeats, extra):
    return route_json(cli, [*shape, "--bands", "--heads", str(heads), "--repeats", str(repeats),
                            *extra], threads)


def sampled(probe):
    """The probe's routed heads as what both calibrate() and the bound read: per
    head the sampled MSE of each candidate and the signal power
    (the choice's MSE over its relative L2 error squared, so that
    error = sqrt(mse / power)), and each candidate's ladder density."""
    heads = [h for h in probe["heads"] if h["routed"] and h["error"]]
    names = list(heads[0]["mse"])
    mse = [[h["mse"][n] for n in names] for h in heads]
    power = [h["mse"][h["choice"]] / h["error"] ** 2 for h in heads]
    rungs = {c["name"]: c["rung"] for c in probe["candidates"]}
    return mse, power, [rungs[n] for n in names]


def calibrate(probe, goal):
    """The largest error target whose choices (the library's rule on the probe's
    sampled MSEs) keep the mean sampled error over the heads <= goal."""
    import numpy as np

    from tilesplash import _core

    mse, power, densities = sampled(probe)
    mse, power = np.array(mse, np.float64), np.array(power, np.float64)

    def mean_error(e):
        index, _, errors = _core.decide_routes(mse, power, densities, None, e)
        return float(np.mean([errors[i][c] for i, c in enumerate(index)]))

    lo, hi = goal, goal
    while mean_error(hi * 2) <= goal and hi < 1e3 * goal:
        hi *= 2
    hi *= 2
    for _ in range(40):
        mid = (lo * hi) ** 0.5
        lo, hi = (mid, hi) if mean_error(mid) <= goal else (lo, mid)
    return lo


FINE_LADDER = "0.02,0.03,0.04,0.05,0.06,0.075,0.1,0.125,0.15,0.2,0.25,0.3,0.35,0.4,0.5,0.6"


def head_errors(probe):
    """Per routed head, {density: the least sampled relative L2 error over the
    families at that density}, from the probe's per-candidate sampled MSEs."""
    mse, power, densities = sampled(probe)
    result = []
    for row, p in zip(mse, power):
        best = {}
        for density, m in zip(densities, row):
            best[density] = min(best.get(density, float("inf")), (m / p) ** 0.5)
        result.append(best)
    return result


def least_mean_density(errors, goal, units=4000):
    """The least mean density over the heads of any one-candidate-per-head
    choice whose mean error is <= goal: a knapsack over the error budget
    heads * goal cut into `units`. Each error is rounded *down* to whole
    units, which only admits more choices, so the result never exceeds the
    exact least density: it is a true lower bound."""
    if not goal > 0:
        raise ValueError(f"least_mean_density: goal must be > 0, got {goal!r}")
    unit = len(errors) * goal / units
    best = [0.0] * (units + 1)  # least density sum with error units <= j
    for head in errors:
        costs = [(density, math.floor(error / unit)) for density, error in head.items()]
        best = [min((best[j - c] + density for density, c in costs if c <= j),
                    default=float("inf")) for j in range(units + 1)]
    return best[units] / len(errors)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cli", default=os.environ.get("TILESPLASH_CLI",
                                                        "build/tools/tilesplash/tilesplash"))
    parser.add_argument("--preset", default="wan2.1-14b-720p")
    parser.add_argument("--geometry", default=None, help="instead of --preset")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--threads", type=int, default=0, help="0: every core")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--densities", default=None, help="the ladder, e.g. 0.05,0.1,0.15,0.25,0.4")
    parser.add_argument("--samples", type=int, default=0,
                        help="the router's rows per call in every run; 0: the library's rule "
                             "(default_router_samples: 16 to 64 by size)")
    parser.add_argument("--compensate", action="store_true",
                        help="the error target's runs compensate skipped tiles; density 0.25 "
                             "stays drop-only")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    shape = ["--geometry", args.geometry] if args.geometry else ["--preset", args.preset]
    shape += ["--samples", str(args.samples)]
    run = lambda extra: route(args.cli, shape, args.heads, args.threads, args.repeats, extra)  # noqa: E731

    fixed = run(["--density", "0.25"])
    ladder = ["--densities", args.densities] if args.densities else []
    ladder += ["--compensate"] if args.compensate else []
    probe = run(["--error", repr(fixed["mean_error"]), *ladder])
    target = calibrate(probe, fixed["mean_error"])
    adaptive = run(["--error", repr(target), *ladder])
    again = run(["--density", "0.25"])
    fine = run(["--error", repr(fixed["mean_error"]), "--densities", FINE_LADDER,
                *(["--compensate"] if args.compensate else [])])
    bounds = {name: least_mean_density(head_errors(p), fixed["mean_error"])
              for name, p in (("ladder", probe), ("fine_ladder", fine))}
    result = {
        "geometry": fixed["geometry"], "heads": args.heads, "samples": fixed["samples"],
        "error_target": target,
        "compensate": args.compensate,
        "density_0.25": {k: fixed[k] for k in ("mean_density", "mean_error", "sparse_ms",
                                               "routing_ms", "layer_ms")},
        "error_target_run": {k: adaptive[k] for k in ("mean_density", "mean_error", "sparse_ms",
                                                      "routing_ms", "layer_ms", "target_missed")},
        "density_ratio": adaptive["mean_density"] / fixed["mean_density"],
        "layer_speedup": fixed["layer_ms"] / adaptive["layer_ms"],
        "attention_speedup": fixed["sparse_ms"] / adaptive["sparse_ms"],
        "routing_ratio": adaptive["routing_ms"] / fixed["routing_ms"],
        "routing_share": adaptive["routing_ms"] / adaptive["layer_ms"],
        "drift": again["sparse_ms"] / fixed["sparse_ms"],
        "least_density_ratio": {k: v / fixed["mean_density"] for k, v in bounds.items()},
        "density_over_bound": adaptive["mean_density"] / bounds["ladder"],
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return result
    print(f"{result['geometry']}, {args.heads} band heads, {fixed['samples']} sampled rows"
          f"{' (error target compensated)' if args.compensate else ''}; error target "
          f"{target:.4f}, whose mean "
          f"sampled error matches density 0.25's ({fixed['mean_error']:.4f})")
    for name, r in (("density 0.25", result["density_0.25"]),
                    ("error target", result["error_target_run"])):
        print(f"  {name:<13} mean density {r['mean_density']:.3f}  mean error "
              f"{r['mean_error']:.4f}  sparse {r['sparse_ms']:.1f} ms  routing "
              f"{r['routing_ms']:.1f} ms  layer {r['layer_ms']:.1f} ms")
    print(f"  density ratio {result['density_ratio']:.3f} (goal <= 0.5)   layer speed-up "
          f"{result['layer_speedup']:.2f}x (goal >= 1.6; attention alone "
          f"{result['attention_speedup']:.2f}x)")
    print(f"  routing {result['routing_ratio']:.2f}x the two-candidate router's (goal <= 1.5), "
          f"{100 * result['routing_share']:.1f}% of the layer (goal <= 10%)   drift "
          f"{result['drift']:.2f}")
    least = result["least_density_ratio"]
    print(f"  bound: the least mean density any per-head choice reaches at that mean error is "
          f"{least['ladder']:.3f} of 0.25's on the ladder, {least['fine_ladder']:.3f} on a "
          f"16-rung ladder from 2% to 60%; run 2's mean density is "
          f"{result['density_over_bound']:.3f}x the ladder's bound (goal <= 1.1)")
    return result


if __name__ == "__main__":
    main()
    sys.exit(0)
