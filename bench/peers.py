#!/usr/bin/env python3
"""tilesplash beside PyTorch on the same machine, in the same run.

Times PyTorch's CPU scaled_dot_product_attention (dense) and FlexAttention
(torch.compile'd flex_attention with a block mask, for the band) on the cases
of issue 13, next to `tilesplash bench` run as a child process of this one,
and prints GFLOP/s on kept pairs (4 * d flops per kept pair per head) and the
ratio tilesplash / PyTorch for each case. The two sides are timed in
alternating rounds so that load from other processes hits both alike; every
figure is a median. Beside the wall-clock ratio, a CPU-time one (process CPU
time per thread on both sides), which a loaded machine disturbs far less;
busy-waiting worker threads count as CPU time on either side.

Needs torch (not part of the test suite). Usage:

    .venv/bin/python bench/peers.py build/tools/tilesplash/tilesplash
    .venv/bin/python bench/peers.py TILESPLASH --cases dense_t1,band --rounds 5 --markdown
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    name: str
    n: int
    d: int
    heads: int
    threads: int
    dtype: str  # f32 or bf16
    band_density: float = 0.0  # 0: dense (SDPA), else a symmetric band (FlexAttention)

    @property
    def half_width(self) -> int:
        # W = N (1 - sqrt(1 - s)) keeps a share s of the map (the band of half-width W over
        # N tokens keeps N^2 - (N - W)^2 pairs).
        return round(self.n * (1.0 - math.sqrt(1.0 - self.band_density)))

    def kept_pairs(self) -> int:
        if self.band_density == 0.0:
            return self.n * self.n
        w = self.half_width
        # Row q keeps keys [q - w, q + w] clipped to [0, n).
        return sum(min(self.n - 1, q + w) - max(0, q - w) + 1 for q in range(self.n))

    def gflop(self) -> float:
        return 4.0 * self.d * self.heads * self.kept_pairs() * 1e-9


CASES = {
    c.name: c
    for c in [
        Case("dense_t1", 8192, 128, 1, 1, "f32"),
        Case("dense_h2_t2", 8192, 128, 2, 2, "f32"),
        Case("dense_bf16_t1", 8192, 128, 1, 1, "bf16"),
        Case("dense_d64_t1", 8192, 64, 1, 1, "f32"),
        Case("band", 32760, 128, 1, 2, "f32", 0.25),
    ]
}


def tilesplash_bench(cli: str, case: Case, repeats: int) -> dict:
    mask = (
        "dense"
        if case.band_density == 0.0
        else f"local:left={case.half_width},right={case.half_width}"
    )
    cmd = [
        cli, "bench", "--mask", mask, "--q-len", str(case.n), "--head-dim", str(case.d),
        "--dtype", case.dtype, "--heads", str(case.heads), "--threads", str(case.threads),
        "--repeats", str(repeats), "--json",
    ]  # fmt: skip
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


class TorchSide:
    """One case's PyTorch callable, built (and for FlexAttention compiled) once."""

    def __init__(self, case: Case):
        import torch

        self.torch = torch
        self.case = case
        torch.set_num_threads(case.threads)
        dtype = torch.float32 if case.dtype == "f32" else torch.bfloat16
        gen = torch.Generator().manual_seed(0)
        shape = (1, case.heads, case.n, case.d)
        self.q, self.k, self.v = (torch.randn(shape, generator=gen).to(dtype) for _ in range(3))
        self.compile_seconds = 0.0
        if case.band_density == 0.0:
            self.name = "SDPA"
            sdpa = torch.nn.functional.scaled_dot_product_attention
            self.fn = lambda: sdpa(self.q, self.k, self.v)
        else:
            from torch.nn.attention.flex_attention import create_block_mask, flex_attention

            self.name = "FlexAttention"
            w = case.half_width

            def band(b, h, q_idx, kv_idx):
                return (kv_idx >= q_idx - w) & (kv_idx <= q_idx + w)

            block_mask = create_block_mask(band, None, None, case.n, case.n, device="cpu")
            compiled = torch.compile(flex_attention)
            self.fn = lambda: compiled(self.q, self.k, self.v, block_mask=block_mask)
            start = time.perf_counter()
            with torch.no_grad():
                self.fn()  # the compile
            self.compile_seconds = time.perf_counter() - start

    def seconds(self, repeats: int) -> tuple[list[float], list[float]]:
        """Wall seconds and CPU seconds per thread (process CPU time / threads) per call."""
        self.torch.set_num_threads(self.case.threads)
        wall, cpu = [], []
        with self.torch.no_grad():
            self.fn()  # warm-up
            for _ in range(repeats):
                start, cpu_start = time.perf_counter(), time.process_time()
                self.fn()
                wall.append(time.perf_counter() - start)
                cpu.append((time.process_time() - cpu_start) / self.case.threads)
        return wall, cpu


def run_case(cli: str, case: Case, rounds: int, repeats: int) -> dict:
    side = TorchSide(case)
    torch_wall: list[float] = []
    torch_cpu: list[float] = []
    ts_records: list[dict] = []
    for _ in range(rounds):
        wall, cpu = side.seconds(repeats)
        torch_wall += wall
        torch_cpu += cpu
        ts_records.append(tilesplash_bench(cli, case, repeats))
    torch_gflops = case.gflop() / statistics.median(torch_wall)
    torch_cpu_gflops = case.gflop() / statistics.median(torch_cpu)

    def med(key: str) -> float:
        return statistics.median(r[key] for r in ts_records)

    ts = med("gflops")
    peak = med("peak_gflops")
    last = ts_records[-1]
    return {
        "case": case.name,
        "shape": f"N={case.n} d={case.d} heads={case.heads} threads={case.threads} {case.dtype}"
        + (f" band {case.band_density:.0%}" if case.band_density else " dense"),
        "tilesplash_gflops": ts,
        "tilesplash_efficiency": med("efficiency"),
        "peak_gflops": peak,
        "tilesplash_cpu_gflops": med("cpu_gflops"),
        "tilesplash_cpu_efficiency": med("cpu_efficiency"),
        "cpu_peak_gflops": med("cpu_peak_gflops"),
        "tiles": f"{last['block_q']}x{last['block_kv']} ({last['blocks_from']})",
        "isa": last["isa"],
        "peer": side.name,
        "peer_gflops": torch_gflops,
        "peer_efficiency": torch_gflops / peak,
        "peer_cpu_gflops": torch_cpu_gflops,
        "peer_cpu_efficiency": torch_cpu_gflops / med("cpu_peak_gflops"),
        "peer_compile_seconds": side.compile_seconds,
        "ratio": ts / torch_gflops,
        "cpu_ratio": med("cpu_gflops") / torch_cpu_gflops,
        "load_average": os.getloadavg()[0],
    }


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cli", help="path of the tilesplash binary")
    parser.add_argument(
        "--cases",
        default=",".join(CASES),
        help=f"comma-separated subset of: {', '.join(CASES)} (default: all)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per case")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per side per round")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--json", action="store_true", help="print one JSON object per case")
    args = parser.parse_args()
    if not os.access(args.cli, os.X_OK):
        parser.error(f"cli: expected an executable tilesplash binary, got '{args.cli}'")
    names = [n for n in args.cases.split(",") if n]
    unknown = [n for n in names if n not in CASES]
    if unknown or args.rounds < 1 or args.repeats < 1:
        parser.error(
            f"--cases: expected names from {', '.join(CASES)}, got {', '.join(unknown)}"
            if unknown
            else "--rounds and --repeats: expected integers >= 1"
        )

    import torch

    print(f"# {machine()}; torch {torch.__version__}; {' '.join(sys.argv)}", flush=True)
    results = []
    for name in names:
        result = run_case(args.cli, CASES[name], args.rounds, args.repeats)
        results.append(result)
        if args.json:
            print(json.dumps(result), flush=True)
        elif not args.markdown:
            print(
                f"{result['case']:14s} tilesplash {result['tilesplash_gflops']:6.1f} GFLOP/s "
                f"(eff {result['tilesplash_efficiency']:.2f}, {result['tiles']})  "
                f"{result['peer']} {result['peer_gflops']:6.1f} "
                f"(eff {result['peer_efficiency']:.2f})  ratio {result['ratio']:.2f}  "
                f"CPU-time ratio {result['cpu_ratio']:.2f}  load {result['load_average']:.1f}",
                flush=True,
            )
    if args.markdown:
        print(
            "| case | tilesplash GFLOP/s (of peak) | PyTorch GFLOP/s (of peak) | ratio "
            "| CPU-time ratio |"
        )
        print("|---|---|---|---|---|")
        for r in results:
            compile_note = (
                f", after a {r['peer_compile_seconds']:.0f} s compile"
                if r["peer_compile_seconds"]
                else ""
            )
            print(
                f"| {r['shape']} | {r['tilesplash_gflops']:.1f} ({r['tilesplash_efficiency']:.2f},"
                f" {r['tiles']}) | {r['peer']} {r['peer_gflops']:.1f} "
                f"({r['peer_efficiency']:.2f}{compile_note}) | {r['ratio']:.2f}x "
                f"| {r['cpu_ratio']:.2f}x |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
