#!/usr/bin/env python3
"""Error target against one density, same run: `tilesplash route` on the band workload.

The workload is planted_band_options (tilesplash/workload.h): heads whose
attention sits in a band of 3% to 40% of the keys, spatial and temporal
alternating. Three routed runs of the same heads on the CPU kernel:

  1. density 0.25, two candidates (Sparse VideoGen's spatial and temporal
     pair): the reference layer time, mean sampled error and routing time;
  2. --error E with E = run 1's mean sampled error, the default 5-step
     ladder (10 candidates): mean density, layer time, routing time;
  3. run 1 again, last, so that a change of load shows as a change of
     run 1's time (printed as "drift").

Printed: mean density of 2 over 1 (goal <= 0.5), layer speed-up 1 / 2 (goal
>= 1.6), routing time 2 / 1 (goal <= 1.5) and routing's share of run 2's
layer (goal <= 0.10). Times are the CLI's medians of --repeats runs after a
warm-up run. The machine must be quiet (docs/kernel.md):

    python bench/error_target.py                       # 720p (Wan 2.1 14B), 8 heads
    python bench/error_target.py --heads 4 --preset wan2.1-1.3b-480p
    python bench/error_target.py --geometry frames=8,height=16,width=16 --heads 8  # a quick check
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys


def route(cli, shape, heads, threads, repeats, extra):
    command = [cli, "route", *shape, "--bands", "--heads", str(heads), "--threads", str(threads),
               "--repeats", str(repeats), "--json", *extra]
    result = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(result.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cli", default=os.environ.get("TILESPLASH_CLI",
                                                        "build/tools/tilesplash/tilesplash"))
    parser.add_argument("--preset", default="wan2.1-14b-720p")
    parser.add_argument("--geometry", default=None, help="instead of --preset")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--densities", default=None, help="the ladder, e.g. 0.05,0.1,0.15,0.25,0.4")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    shape = ["--geometry", args.geometry] if args.geometry else ["--preset", args.preset]
    run = lambda extra: route(args.cli, shape, args.heads, args.threads, args.repeats, extra)  # noqa: E731

    fixed = run(["--density", "0.25"])
    target = fixed["mean_error"]
    ladder = ["--densities", args.densities] if args.densities else []
    adaptive = run(["--error", repr(target), *ladder])
    again = run(["--density", "0.25"])
    result = {
        "geometry": fixed["geometry"], "heads": args.heads, "error_target": target,
        "density_0.25": {k: fixed[k] for k in ("mean_density", "mean_error", "sparse_ms",
                                               "routing_ms", "layer_ms")},
        "error_target_run": {k: adaptive[k] for k in ("mean_density", "mean_error", "sparse_ms",
                                                      "routing_ms", "layer_ms", "target_missed")},
        "density_ratio": adaptive["mean_density"] / fixed["mean_density"],
        "layer_speedup": fixed["sparse_ms"] / adaptive["sparse_ms"],
        "routing_ratio": adaptive["routing_ms"] / fixed["routing_ms"],
        "routing_share": adaptive["routing_ms"] / adaptive["layer_ms"],
        "drift": again["sparse_ms"] / fixed["sparse_ms"],
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{result['geometry']}, {args.heads} band heads; error target = density 0.25's mean "
          f"sampled error = {target:.4f}")
    for name, r in (("density 0.25", result["density_0.25"]),
                    ("error target", result["error_target_run"])):
        print(f"  {name:<13} mean density {r['mean_density']:.3f}  mean error "
              f"{r['mean_error']:.4f}  sparse {r['sparse_ms']:.1f} ms  routing "
              f"{r['routing_ms']:.1f} ms  layer {r['layer_ms']:.1f} ms")
    print(f"  density ratio {result['density_ratio']:.3f} (goal <= 0.5)   layer speed-up "
          f"{result['layer_speedup']:.2f}x (goal >= 1.6)")
    print(f"  routing {result['routing_ratio']:.2f}x the two-candidate router's (goal <= 1.5), "
          f"{100 * result['routing_share']:.1f}% of the layer (goal <= 10%)   drift "
          f"{result['drift']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
