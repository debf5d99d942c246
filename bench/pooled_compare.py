#!/usr/bin/env python3
"""The pooled method against the error target and against svg, accuracy only.

1. The planted band workload (`tilesplash route --bands`, bench/error_target.py's):
   svg at density 0.25 gives the reference error (mean over the heads of the
   full relative L2 error against dense); the error target on svg's ladder
   (--method svg --error E) and the pooled method's error target over p
   (--method pooled --error E) are each swept over E, and the mean density
   each reaches at the reference error is interpolated on its (mean error,
   mean density) curve. Printed: both densities and their ratio (the goal of
   issue 35: pooled within 1.2x of the error target's).
2. Planted heads that are neither spatial nor temporal (`tilesplash compare
   --planted cluster,decay+cluster,decay`): the full relative L2 error of svg
   (drop-only) and pooled at each target density, with the densities they
   really ran.

No timings: the errors and densities do not depend on the machine's load.

    PYTHONPATH=build/python python bench/pooled_compare.py
    python bench/pooled_compare.py --geometry frames=8,height=16,width=16 --heads 8
"""

from __future__ import annotations

import argparse
import json
import subprocess

ERRORS = [0.005, 0.01, 0.02, 0.03, 0.05, 0.08, 0.12, 0.2, 0.3, 0.5]


def cli_json(cli, args):
    out = subprocess.run([cli, *args, "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def route(cli, common, extra):
    run = cli_json(cli, ["route", *common, "--bands", "--compare-dense", *extra])
    heads = run["heads"]
    density = sum(h["density"] for h in heads) / len(heads)
    error = sum(h["rel_l2_vs_dense"] for h in heads) / len(heads)
    return density, error


def density_at(curve, error):
    """Mean density at `error` on a (mean error, mean density) curve, linear
    between the two runs around it; None when the curve does not reach it."""
    points = sorted(curve, key=lambda p: p[1])  # by error
    for (e0, d0), (e1, d1) in zip(points, points[1:]):
        lo, hi = sorted((e0, e1))
        if lo <= error <= hi and e0 != e1:
            return d0 + (d1 - d0) * (error - e0) / (e1 - e0)
    exact = [d for e, d in points if e <= error]
    return min(exact) if exact else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cli", default="build/tools/tilesplash/tilesplash")
    parser.add_argument("--geometry", default="frames=8,height=16,width=16")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--head-dim", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    common = ["--geometry", args.geometry, "--heads", str(args.heads), "--head-dim",
              str(args.head_dim), "--dtype", "f32", "--threads", str(args.threads)]

    ref_density, ref_error = route(args.cli, common, ["--method", "svg", "--density", "0.25"])
    print(f"band workload {args.geometry}, {args.heads} heads: svg at 0.25: mean density "
          f"{ref_density:.4f}, mean rel L2 {ref_error:.4f}")
    curves = {}
    for method in ("svg", "pooled"):
        curve = [(e, d) for d, e in (route(args.cli, common, ["--method", method, "--error",
                                                               str(target)])
                                     for target in ERRORS)]
        curves[method] = [(e, d) for e, d in curve]
        for target, (e, d) in zip(ERRORS, curve):
            print(f"  {method:6s} --error {target:<6g} mean density {d:.4f}  mean rel L2 {e:.4f}")
    at = {m: density_at([(e, d) for e, d in c], ref_error) for m, c in curves.items()}
    print(f"mean density at rel L2 {ref_error:.4f}: error target (svg ladder) {at['svg']}, "
          f"pooled {at['pooled']}")
    if at["svg"] and at["pooled"]:
        print(f"pooled / error target: {at['pooled'] / at['svg']:.3f} (goal <= 1.2)")

    compare = cli_json(args.cli, ["compare", "--geometry", args.geometry, "--head-dim",
                                  str(args.head_dim), "--dtype", "f32", "--threads",
                                  str(args.threads), "--methods", "svg,pooled", "--planted",
                                  "cluster,decay+cluster,decay", "--densities", "0.1,0.25"])
    print("planted heads neither spatial nor temporal (full rel L2 against dense):")
    print(f"  {'planted':14s} {'target':>6s} {'svg density':>11s} {'svg rel_l2':>10s} "
          f"{'pooled density':>14s} {'pooled rel_l2':>13s}")
    rows = {(r["method"], r["planted"], r["target_density"]): r for r in compare["rows"]
            if "planted" in r and r.get("method") in ("svg", "pooled")}
    for (method, planted, target), row in sorted(rows.items()):
        if method != "svg":
            continue
        other = rows.get(("pooled", planted, target))
        if other is None:
            continue
        print(f"  {planted:14s} {target:6.2f} {row['density']:11.4f} {row['rel_l2']:10.4f} "
              f"{other['density']:14.4f} {other['rel_l2']:13.4f}")


if __name__ == "__main__":
    main()
