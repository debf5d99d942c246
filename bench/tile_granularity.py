#!/usr/bin/env python3
"""Tile-granular against token-exact masks: accuracy and density, same run.

For each method (svg, radial, sta) and granularity (token, tile), one
`tilesplash route --bands --compare-dense --json` run on the planted band
workload (tilesplash/workload.h: band heads of 3% to 40% of the keys, spatial
and temporal alternating), at one target density: every head's relative L2
error of its whole output against dense attention on the same data, and the
density its mask keeps (for "tile", the mask rounded out to the kernel's
block_q x block_kv tiles in the order the head runs). Printed: one table row
per (method, granularity) with the mean and max error over the heads and the
mean density, then the density ratio tile / token; with --matched, also "tile"
at the lower target density whose rounded masks keep --density on average
(found by bisection on plan densities), i.e. the same kept density as "token". Only errors and densities:
no timing is read, so a busy machine changes nothing but the wall time.

    PYTHONPATH=build/python python bench/tile_granularity.py            # Wan 2.1 480p, 8 heads
    python bench/tile_granularity.py --geometry frames=8,height=16,width=16 --heads 4  # quick
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from route_cli import route_json

METHODS = ("svg", "radial", "sta")


def route(cli, shape, heads, density, method, granularity, threads, blocks):
    return route_json(cli, [*shape, "--bands", "--heads", str(heads), "--density", str(density),
                            "--method", method, "--granularity", granularity, "--compare-dense",
                            "--block-q", str(blocks[0]), "--block-kv", str(blocks[1])], threads)


def rounded_density(shape_text, method, density, blocks):
    """The mean density of `method`'s candidates at target `density`, each rounded out to
    `blocks` tiles in its run order: what a tile-granular head of it keeps."""
    import tilesplash

    if "=" in shape_text:
        geometry = tilesplash.VideoGeometry.parse(shape_text)
    else:
        geometry = tilesplash.presets()[shape_text]["geometry"]
    layer = tilesplash.VideoAttention(geometry, method=method, density=density, backend="cpu",
                                      block_q=blocks[0], block_kv=blocks[1])
    n, values = geometry.tokens, []
    for name, _ in layer.candidates:
        run = layer.candidate_run(name)
        rounded = run["run_mask"].tile_granular(n, n, *blocks)
        values.append(tilesplash.plan(rounded, n, n, *blocks).stats()["density"])
    return sum(values) / len(values)


def matched_density(shape_text, method, goal, blocks):
    """The target density whose tile-granular candidates keep `goal` on average
    (bisection on plan densities: no attention runs)."""
    lo, hi = 0.005, goal
    for _ in range(20):
        mid = (lo + hi) / 2
        if rounded_density(shape_text, method, mid, blocks) > goal:
            hi = mid
        else:
            lo = mid
    return lo


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default=None)
    parser.add_argument("--geometry", default=None)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--density", type=float, default=0.25)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--block-q", type=int, default=128)
    parser.add_argument("--block-kv", type=int, default=128)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--cli", default=os.environ.get("TILESPLASH_CLI",
                                                        "build/tools/tilesplash/tilesplash"))
    parser.add_argument("--json", action="store_true", help="print the rows as JSON too")
    parser.add_argument("--granularities", default="token,tile",
                        help="of token,tile, the ones to run (empty: only --matched)")
    parser.add_argument("--matched", action="store_true",
                        help="also run 'tile' at the lower target density whose rounded masks "
                             "keep --density on average (the same kept density as 'token')")
    args = parser.parse_args(argv)
    if args.geometry:
        shape = ["--geometry", args.geometry]
    else:
        shape = ["--preset", args.preset or "wan2.1-1.3b-480p"]
    rows = []
    for method in args.methods.split(","):
        densities = {}
        for granularity in filter(None, args.granularities.split(",")):
            record = route(args.cli, shape, args.heads, args.density, method, granularity,
                           args.threads, (args.block_q, args.block_kv))
            heads = record["heads"]
            errors = [h["rel_l2_vs_dense"] for h in heads]
            density = sum(h["density"] for h in heads) / len(heads)
            densities[granularity] = density
            rows.append({"method": method, "granularity": granularity,
                         "geometry": record["geometry"], "heads": len(heads),
                         "choices": [h["choice"] for h in heads],
                         "mean_error": sum(errors) / len(errors), "max_error": max(errors),
                         "mean_density": density, "errors": errors,
                         "densities": [h["density"] for h in heads]})
        if len(densities) == 2:
            rows[-1]["density_ratio"] = densities["tile"] / densities["token"]
        if args.matched:
            target = matched_density(shape[1], method, args.density,
                                     (args.block_q, args.block_kv))
            record = route(args.cli, shape, args.heads, target, method, "tile", args.threads,
                           (args.block_q, args.block_kv))
            heads = record["heads"]
            errors = [h["rel_l2_vs_dense"] for h in heads]
            rows.append({"method": method, "granularity": f"tile@{target:.3f}",
                         "geometry": record["geometry"], "heads": len(heads),
                         "choices": [h["choice"] for h in heads],
                         "mean_error": sum(errors) / len(errors), "max_error": max(errors),
                         "mean_density": sum(h["density"] for h in heads) / len(heads),
                         "errors": errors, "densities": [h["density"] for h in heads]})
    print(f"{'method':8} {'granularity':11} {'mean rel L2':>12} {'max rel L2':>11} "
          f"{'mean density':>13} {'tile/token':>10}")
    for r in rows:
        ratio = f"{r['density_ratio']:.3f}" if "density_ratio" in r else ""
        print(f"{r['method']:8} {r['granularity']:11} {r['mean_error']:12.4f} "
              f"{r['max_error']:11.4f} {r['mean_density']:13.3f} {ratio:>10}")
    if args.json:
        print(json.dumps(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
