#!/usr/bin/env python3
"""Sequence parallelism on one machine: 2 ranks x 1 thread against 1 rank x 2 threads.

Ulysses (tilesplash.distributed) on the Wan 2.1 1.3B 480p shape (32,760
tokens, 12 heads, d = 128, f32), dense and the 25% spatial band, over two
local gloo ranks. Per rank it times the all-to-all into head shards, the
attention on the local heads and the all-to-all back, each after a barrier
so that the exchange is timed alone, then the whole ulysses_attention call
as a user runs it; one process with two threads runs the same attention for
comparison, and one ring hop (a K/V shard to the next rank) is timed for the
ring model. Figures are medians over --repeats, with the load (uptime) and
the ISA; work is GFLOP/s on kept pairs (4 d flops per kept pair and head).

    PYTHONPATH=build/python python bench/ulysses.py             # 480p, ~5 min on 2 quiet cores
    PYTHONPATH=build/python python bench/ulysses.py --quick     # 8,190 tokens, ~30 s
    PYTHONPATH=build/python python bench/ulysses.py --json out.json [--ring]
    python bench/ulysses.py --model out.json                    # docs/scaling.md's table

--model prints the predicted efficiency for 8, 64 and 512 ranks at 720p and
1440p (Wan 2.1 14B) over 25 and 100 GB/s links, calibrated with a --json
file of this benchmark (see docs/scaling.md for the model).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import time

SHAPES = {
    "480p": {"geometry": "preset=wan2.1-1.3b-480p", "tokens": 32760, "heads": 12},
    "quick": {"geometry": "frames=21,height=15,width=26", "tokens": 8190, "heads": 12},
}
HEAD_DIM = 128


def masks(geometry):
    return {"dense": "dense", "band25": f"spatial:{geometry},density=0.25"}


def load():
    return os.getloadavg()[0]


def uptime_text():
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"load average {os.getloadavg()}"


def kept_pairs(mask, tokens):
    import tilesplash

    return tilesplash.plan(mask, tokens).stats()["kept_pairs"]


def gflops(pairs, heads, seconds):
    return 4.0 * HEAD_DIM * pairs * heads / seconds / 1e9


def warm_up(torch, tilesplash):
    # The first torch call of the op imports torch._dynamo (seconds): not attention time.
    x = torch.randn(1, 64, 2, HEAD_DIM)
    tilesplash.attention(x, x, x, layout="bnhd", threads=1)


def rank_main(rank, world, port, shape, repeats, ring, results):
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch
    import torch.distributed as dist

    import tilesplash
    from tilesplash import distributed

    torch.set_num_threads(1)
    store = dist.TCPStore("127.0.0.1", port, world, is_master=False,
                          timeout=datetime.timedelta(hours=2))
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(hours=2))
    warm_up(torch, tilesplash)
    tokens, heads = shape["tokens"], shape["heads"]
    sizes = tuple(b - a for a, b in (((r * tokens) // world, ((r + 1) * tokens) // world)
                                     for r in range(world)))
    gen = torch.Generator().manual_seed(rank)
    q, k, v = (torch.randn(1, sizes[rank], heads, HEAD_DIM, generator=gen) for _ in range(3))
    exchange = distributed.ulysses_exchange(sizes[rank], heads, timeout=7200)
    # Steady state, as from the second layer on: the exchange's buffers exist.
    qh, _, _ = exchange.to_heads(q, k, v, scratch=True)
    exchange.to_sequence(qh)
    out = {}
    for name, mask in masks(shape["geometry"]).items():
        rows = []
        for _ in range(repeats):
            row = {}
            dist.barrier()
            t = time.perf_counter()
            qh, kh, vh = exchange.to_heads(q, k, v, scratch=True)
            row["a2a_in"] = time.perf_counter() - t
            t = time.perf_counter()
            o, _ = tilesplash.attention(qh, kh, vh, mask=mask, layout="bnhd", threads=1,
                                        return_lse=True)
            row["attention"] = time.perf_counter() - t
            dist.barrier()
            t = time.perf_counter()
            exchange.to_sequence(o)
            row["a2a_out"] = time.perf_counter() - t
            del qh, kh, vh, o
            dist.barrier()
            t = time.perf_counter()
            distributed.ulysses_attention(q, k, v, mask=mask, threads=1, timeout=7200)
            row["ulysses_call"] = time.perf_counter() - t
            if ring:
                dist.barrier()
                t = time.perf_counter()
                distributed.ring_attention(q, k, v, mask=mask, threads=1, timeout=7200)
                row["ring_call"] = time.perf_counter() - t
            rows.append(row)
        out[name] = rows
    # One ring hop: this rank's K/V shard to the next rank, the previous rank's in.
    kv = torch.cat([k.reshape(-1), v.reshape(-1)])
    incoming = torch.empty(2 * sizes[(rank - 1) % world] * heads * HEAD_DIM)
    hops = []
    for _ in range(max(3, repeats)):
        dist.barrier()
        t = time.perf_counter()
        ops = [dist.P2POp(dist.isend, kv, (rank + 1) % world),
               dist.P2POp(dist.irecv, incoming, (rank - 1) % world)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        hops.append(time.perf_counter() - t)
    out["ring_hop"] = {"seconds": hops, "bytes": kv.numel() * 4}
    out["a2a_bytes_sent"] = {
        "in": 3 * sizes[rank] * HEAD_DIM * 4 * (heads - (exchange.heads[1] - exchange.heads[0])),
        "out": (exchange.heads[1] - exchange.heads[0]) * (tokens - sizes[rank]) * HEAD_DIM * 4,
    }
    results.put((rank, out))
    dist.barrier()
    dist.destroy_process_group()


def run_ranks(world, shape, repeats, ring):
    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", 0, world + 1, is_master=True, wait_for_workers=False,
                     timeout=datetime.timedelta(hours=2))
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=rank_main,
                         args=(r, world, store.port, shape, repeats, ring, results))
             for r in range(world)]
    try:
        for p in procs:
            p.start()
        collected = dict(results.get(timeout=7200) for _ in range(world))
        for p in procs:
            p.join(timeout=60)
        return [collected[r] for r in range(world)]
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=10)


def single_rank(shape, repeats, threads):
    import torch

    import tilesplash

    torch.set_num_threads(threads)
    warm_up(torch, tilesplash)
    gen = torch.Generator().manual_seed(99)
    tokens, heads = shape["tokens"], shape["heads"]
    q, k, v = (torch.randn(1, tokens, heads, HEAD_DIM, generator=gen) for _ in range(3))
    out = {}
    for name, mask in masks(shape["geometry"]).items():
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            tilesplash.attention(q, k, v, mask=mask, layout="bnhd", threads=threads)
            times.append(time.perf_counter() - t)
        out[name] = times
    return out


def summarise(shape_name, shape, repeats, single, ranks, load_before, load_after):
    import tilesplash
    import torch

    tokens, heads = shape["tokens"], shape["heads"]
    med = statistics.median
    report = {
        "bench": "ulysses",
        "shape": {"name": shape_name, "tokens": tokens, "heads": heads, "head_dim": HEAD_DIM,
                  "dtype": "f32", "geometry": shape["geometry"]},
        "machine": {"isa": tilesplash.active_isa(), "cpus": os.cpu_count(),
                    "cpu": platform.processor() or platform.machine(),
                    "torch": torch.__version__, "uptime_before": load_before,
                    "uptime_after": load_after},
        "repeats": repeats,
        "results": {},
    }
    for name, mask in masks(shape["geometry"]).items():
        pairs = kept_pairs(mask, tokens)
        per_rank = [r[name] for r in ranks]
        attention = max(med([x["attention"] for x in rows]) for rows in per_rank)
        a2a_in = max(med([x["a2a_in"] for x in rows]) for rows in per_rank)
        a2a_out = max(med([x["a2a_out"] for x in rows]) for rows in per_rank)
        call = max(med([x["ulysses_call"] for x in rows]) for rows in per_rank)
        one = med(single[name])
        rank_heads = [b - a for a, b in ((r * heads // len(ranks), (r + 1) * heads // len(ranks))
                                         for r in range(len(ranks)))]
        report["results"][name] = {
            "mask": mask,
            "kept_pairs": pairs,
            "density": pairs / tokens ** 2,
            "single_2threads_s": one,
            "single_gflops": gflops(pairs, heads, one),
            "ulysses_call_s": call,
            "rank_attention_s": attention,
            "rank_gflops": gflops(pairs, max(rank_heads), attention),
            "a2a_in_s": a2a_in,
            "a2a_out_s": a2a_out,
            "a2a_share": (a2a_in + a2a_out) / attention,
            "speed_vs_single": one / call,
            "ring_call_s": (max(med([x["ring_call"] for x in rows]) for rows in per_rank)
                            if "ring_call" in per_rank[0][0] else None),
            "raw": {"single": single[name], "ranks": per_rank},
        }
    hop = max(med(r["ring_hop"]["seconds"]) for r in ranks)
    report["ring_hop"] = {"seconds": hop, "bytes": ranks[0]["ring_hop"]["bytes"],
                          "gb_per_s": ranks[0]["ring_hop"]["bytes"] / hop / 1e9}
    sent = ranks[0]["a2a_bytes_sent"]
    dense = report["results"]["dense"]
    report["a2a"] = {"bytes_sent_rank0": sent,
                     "gb_per_s": (sent["in"] + sent["out"]) / (dense["a2a_in_s"] +
                                                               dense["a2a_out_s"]) / 1e9}
    return report


def print_summary(report):
    s, m = report["shape"], report["machine"]
    print(f"tilesplash Ulysses: {s['tokens']} tokens, {s['heads']} heads, d = {s['head_dim']}, "
          f"{s['dtype']}, 2 ranks x 1 thread vs 1 rank x 2 threads; isa {m['isa']}, "
          f"{m['cpus']} cpus; medians of {report['repeats']}")
    print(f"load before: {m['uptime_before']}")
    print(f"load after:  {m['uptime_after']}")
    print()
    print(f"{'mask':8} {'density':>8} {'1x2 s':>9} {'2x1 s':>9} {'speed':>6} "
          f"{'attn/rank s':>12} {'GFLOP/s/rank':>13} {'a2a in s':>9} {'a2a out s':>10} "
          f"{'a2a/attn':>9}")
    for name, r in report["results"].items():
        print(f"{name:8} {r['density']:8.4f} {r['single_2threads_s']:9.2f} "
              f"{r['ulysses_call_s']:9.2f} {r['speed_vs_single']:6.2f} "
              f"{r['rank_attention_s']:12.2f} {r['rank_gflops']:13.1f} {r['a2a_in_s']:9.3f} "
              f"{r['a2a_out_s']:10.3f} {100 * r['a2a_share']:8.2f}%")
    hop, a2a = report["ring_hop"], report["a2a"]
    for name, r in report["results"].items():
        if r["ring_call_s"] is not None:
            print(f"ring_attention {name}: {r['ring_call_s']:.2f} s per call (2 x 1), "
                  f"{r['single_2threads_s'] / r['ring_call_s']:.2f}x the 1 x 2 time")
    print()
    print(f"all-to-all over loopback: {a2a['gb_per_s']:.2f} GB/s sent per rank; one ring hop "
          f"({hop['bytes'] / 1e6:.0f} MB of K/V): {hop['seconds']:.3f} s, "
          f"{hop['gb_per_s']:.2f} GB/s")


# The scaling model of docs/scaling.md.

MODEL_SHAPES = {  # Wan 2.1 14B: 21 latent frames, 40 heads x 128
    "720p": {"tokens": 75600, "heads": 40},
    "1440p": {"tokens": 302400, "heads": 40},
}
RANKS = (8, 64, 512)
LINKS_GB_S = (25.0, 100.0)
LATENCY_S = 20e-6  # per message; an all-to-all sends u - 1 of them each way
BIG_RANK_CORES = 64


def predict(tokens, heads, density, ranks, link_gb_s, rank_gflops, host_a2a_gb_s, host_hop_gb_s,
            bytes_per=4):
    """One layer's self-attention on one rank: compute and exposed communication (seconds).

    Ulysses over u = gcd(P, H) ranks, the ring over the P / u groups (USP).
    Sending costs the wire (link_gb_s) plus the host's own work per byte
    (packing, gloo's TCP path), measured on loopback as host_*_gb_s, in series.
    """
    u = math.gcd(ranks, heads)
    r = ranks // u
    attention = 4.0 * HEAD_DIM * density * tokens ** 2 * heads / ranks / (rank_gflops * 1e9)
    a2a_bytes = 4.0 * tokens / ranks * heads * HEAD_DIM * bytes_per * (u - 1) / u
    a2a = a2a_bytes * (1 / (link_gb_s * 1e9) + 1 / (host_a2a_gb_s * 1e9)) + 2 * (u - 1) * LATENCY_S
    exposed_ring, hop_bytes = 0.0, 0.0
    if r > 1:
        hop_bytes = 2.0 * tokens / r * heads / u * HEAD_DIM * bytes_per
        hop = hop_bytes * (1 / (link_gb_s * 1e9) + 1 / (host_hop_gb_s * 1e9)) + LATENCY_S
        # A band needs only the ring steps its half-width reaches; the others
        # move nothing. Each needed hop runs during the previous step's compute
        # (the first during the rank's own block) and shows only where longer.
        width = 1.0 - math.sqrt(1.0 - density) if density < 1.0 else 1.0
        steps = min(r, 1 + 2 * math.ceil(width * r))
        exposed_ring = (steps - 1) * max(0.0, hop - attention / steps)
    return {"ranks": ranks, "ulysses": u, "ring": r, "attention_s": attention,
            "a2a_bytes": a2a_bytes, "a2a_s": a2a, "ring_hop_bytes": hop_bytes,
            "ring_exposed_s": exposed_ring,
            "efficiency": attention / (attention + a2a + exposed_ring)}


def print_model(calibration):
    results = calibration["results"]
    host_a2a = calibration["a2a"]["gb_per_s"]
    host_hop = calibration["ring_hop"]["gb_per_s"]
    print(f"Calibration: {calibration['shape']['tokens']} tokens, {calibration['machine']['isa']}, "
          f"load {calibration['machine']['uptime_before']}")
    print(f"host-side exchange throughput on loopback: all-to-all {host_a2a:.2f} GB/s, "
          f"ring hop {host_hop:.2f} GB/s per rank; link latency {LATENCY_S * 1e6:g} us")
    for name, density in (("dense", 1.0), ("band25", 0.25)):
        per_core = results[name]["rank_gflops"]
        print()
        print(f"{name} (density {density}): a rank of one core at {per_core:.1f} GFLOP/s "
              f"(measured), or of {BIG_RANK_CORES} such cores")
        print()
        print(f"| shape | ranks | Ulysses x ring | link GB/s | attention s/rank, 1 core | "
              f"Ulysses MB/rank | efficiency, 1 core | efficiency, {BIG_RANK_CORES} cores | "
              f"efficiency, {BIG_RANK_CORES} cores, wire only |")
        print("|---|---|---|---|---|---|---|---|---|")
        for shape_name, shape in MODEL_SHAPES.items():
            for ranks in RANKS:
                for link in LINKS_GB_S:
                    one, big, wire = (
                        predict(shape["tokens"], shape["heads"], density, ranks, link,
                                cores * per_core, a2a, hop)
                        for cores, a2a, hop in ((1, host_a2a, host_hop),
                                                (BIG_RANK_CORES, host_a2a, host_hop),
                                                (BIG_RANK_CORES, math.inf, math.inf)))
                    print(f"| {shape_name} | {ranks} | {one['ulysses']} x {one['ring']} | "
                          f"{link:g} | {one['attention_s']:.1f} | {one['a2a_bytes'] / 1e6:.0f} | "
                          f"{100 * one['efficiency']:.1f}% | {100 * big['efficiency']:.1f}% | "
                          f"{100 * wire['efficiency']:.1f}% |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="8,190 tokens instead of 32,760")
    parser.add_argument("--repeats", type=int, default=None,
                        help="runs per figure (default 1 at 480p, 3 with --quick)")
    parser.add_argument("--ring", action="store_true",
                        help="also time ring_attention end to end (doubles the run)")
    parser.add_argument("--json", metavar="PATH",
                        help="write the full results as JSON ('-': stdout)")
    parser.add_argument("--model", metavar="JSON",
                        help="print the scaling table calibrated with a --json result and exit")
    args = parser.parse_args()
    if args.model:
        with open(args.model) as f:
            print_model(json.load(f))
        return
    shape_name = "quick" if args.quick else "480p"
    shape = SHAPES[shape_name]
    repeats = args.repeats or (3 if args.quick else 1)
    load_before = uptime_text()
    single = single_rank(shape, repeats, threads=2)
    ranks = run_ranks(2, shape, repeats, args.ring)
    report = summarise(shape_name, shape, repeats, single, ranks, load_before, uptime_text())
    print_summary(report)
    if args.json == "-":
        json.dump(report, sys.stdout, indent=1)
    elif args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
