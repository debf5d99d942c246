#!/usr/bin/env python3
"""One Wan 2.1 1.3B transformer block: diffusers' native attention against tilesplash, same run.

Builds a one-layer WanTransformer3DModel with Wan 2.1 1.3B's shapes (12 heads x
128, ffn 8960, text 4096, random weights, f32) and runs it on a random latent
of 21 frames x 60 x 104 (480p: 32,760 tokens after patching), first with
diffusers' own attention (PyTorch SDPA), then with tilesplash.diffusers at 25%
density with per-head routing. Reports, per mode, the block's time, its
self-attention time and share, the speed-ups, and the cosine similarity of the
two block outputs. Timings are medians over --repeats forwards.

    python bench/wan_block.py                        # 480p: minutes (native ~3 min a forward on 2 cores)
    python bench/wan_block.py --tokens 8190          # 21 x 15 x 26, a quick check
    python bench/wan_block.py --frames 5 --height 8 --width 16 --repeats 3 --json

The block time is measured around model.blocks[0] (patch embedding, text
projection and output head are outside it); self-attention time is the SDPA
call for native and the tilesplash call (routing, permutation, kernel) for
tilesplash; cross-attention stays native in both and counts in the block only.
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

import torch

import diffusers.models.transformers.transformer_wan as transformer_wan
from diffusers import WanTransformer3DModel

# Wan 2.1 T2V 1.3B (Wan-AI/Wan2.1-T2V-1.3B-Diffusers transformer/config.json), one layer.
WAN_1_3B = dict(
    patch_size=(1, 2, 2),
    num_attention_heads=12,
    attention_head_dim=128,
    in_channels=16,
    out_channels=16,
    text_dim=4096,
    freq_dim=256,
    ffn_dim=8960,
    cross_attn_norm=True,
    qk_norm="rms_norm_across_heads",
    eps=1e-6,
    rope_max_seq_len=1024,
)
TEXT_TOKENS = 512  # UMT5 context length Wan pads prompts to


class Timers:
    """Wall time of the block and of each attention call, per forward."""

    def __init__(self, model: WanTransformer3DModel) -> None:
        self.block = 0.0
        self.self_attention = 0.0
        self.cross_attention = 0.0
        self.output: torch.Tensor | None = None
        self._start = 0.0
        block = model.blocks[0]
        self._hooks = [
            block.register_forward_pre_hook(self._block_start),
            block.register_forward_hook(self._block_end),
        ]
        self._dispatch = transformer_wan.dispatch_attention_fn
        transformer_wan.dispatch_attention_fn = self._timed_dispatch

    def reset(self) -> None:
        self.block = self.self_attention = self.cross_attention = 0.0

    def close(self) -> None:
        transformer_wan.dispatch_attention_fn = self._dispatch
        for hook in self._hooks:
            hook.remove()

    def _block_start(self, module, args):
        self._start = time.perf_counter()

    def _block_end(self, module, args, output):
        self.block += time.perf_counter() - self._start
        self.output = output

    def _timed_dispatch(self, query, key, value, *args, **kwargs):
        start = time.perf_counter()
        out = self._dispatch(query, key, value, *args, **kwargs)
        seconds = time.perf_counter() - start
        if key.shape[1] == query.shape[1]:
            self.self_attention += seconds
        else:
            self.cross_attention += seconds
        return out


def geometry_for_tokens(tokens: int) -> tuple[int, int, int]:
    """21 latent frames at 480p's aspect (30 x 52 tokens a frame), scaled to about `tokens`."""
    per_frame = tokens / 21
    height = max(1, round(math.sqrt(per_frame * 30 / 52)))
    width = max(1, round(per_frame / height))
    return 21, height, width


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_isa() -> str:
    flags = set()
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    for isa, needed in (("avx512bf16", {"avx512f", "avx512_bf16"}), ("avx512", {"avx512f"}), ("avx2", {"avx2", "fma"})):
        if needed <= flags:
            return isa
    return "generic"


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run_mode(model, inputs, timers: Timers, repeats: int, label: str, log) -> dict:
    blocks, attention, cross = [], [], []
    for repeat in range(repeats):
        timers.reset()
        with torch.inference_mode():
            model(**inputs, return_dict=False)
        blocks.append(timers.block)
        attention.append(timers.self_attention)
        cross.append(timers.cross_attention)
        log(f"{label} forward {repeat + 1}/{repeats}: block {timers.block:.2f} s, self-attention {timers.self_attention:.2f} s")
    return {
        "block_s": statistics.median(blocks),
        "self_attention_s": statistics.median(attention),
        "cross_attention_s": statistics.median(cross),
        "block_runs_s": blocks,
        "self_attention_runs_s": attention,
        "output": timers.output.double().flatten(),
    }


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--tokens", type=int, help="about this many video tokens: 21 frames at 480p's aspect")
    shape.add_argument("--frames", type=int, help="latent frames (with --height, --width: tokens after patching)")
    parser.add_argument("--height", type=int, default=30, help="tokens per column after patching (default 30)")
    parser.add_argument("--width", type=int, default=52, help="tokens per row after patching (default 52)")
    parser.add_argument("--density", type=float, default=0.25, help="tilesplash density (default 0.25)")
    parser.add_argument("--threads", type=int, default=2, help="PyTorch and tilesplash threads (default 2)")
    parser.add_argument("--repeats", type=int, default=1, help="forwards per mode; medians are reported (default 1)")
    parser.add_argument("--mode", choices=("both", "native", "tilesplash"), default="both")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    if args.tokens is not None:
        args.frames, args.height, args.width = geometry_for_tokens(args.tokens)
    elif args.frames is None:
        args.frames = 21
    for name in ("frames", "height", "width", "threads", "repeats"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    log = (lambda message: print(message, file=sys.stderr, flush=True))
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = WanTransformer3DModel(num_layers=1, **WAN_1_3B).eval()
    generator = torch.Generator().manual_seed(args.seed)
    inputs = {
        "hidden_states": torch.randn(1, 16, args.frames, 2 * args.height, 2 * args.width, generator=generator),
        "timestep": torch.tensor([500]),
        "encoder_hidden_states": torch.randn(1, TEXT_TOKENS, WAN_1_3B["text_dim"], generator=generator),
    }
    tokens = args.frames * args.height * args.width
    load_before = uptime()
    log(f"Wan 2.1 1.3B block, {args.frames} x {args.height} x {args.width} = {tokens} tokens, "
        f"{args.threads} threads, f32; {load_before}")

    timers = Timers(model)
    results: dict = {}
    heads: list[dict] = []
    try:
        if args.mode in ("both", "native"):
            results["native"] = run_mode(model, inputs, timers, args.repeats, "native", log)
        if args.mode in ("both", "tilesplash"):
            import tilesplash.diffusers

            handle = tilesplash.diffusers.enable(
                model, density=args.density, dense_layers=0, dense_steps=0, threads=args.threads
            )
            try:
                results["tilesplash"] = run_mode(model, inputs, timers, args.repeats, "tilesplash", log)
                report = handle.report()
            finally:
                handle.remove()
            # The tilesplash processor's own clock, for the self-attention time (the dispatch hook sees none).
            per_forward = [record["seconds"] for record in report]
            results["tilesplash"]["self_attention_runs_s"] = per_forward
            results["tilesplash"]["self_attention_s"] = statistics.median(per_forward)
            heads = report[-1]["heads"]
            results["tilesplash"]["layer_report"] = {
                key: value for key, value in report[-1].items() if key not in ("heads", "geometry")
            }
    finally:
        timers.close()

    summary = {
        "benchmark": "wan2.1-1.3b block",
        "frames": args.frames,
        "height": args.height,
        "width": args.width,
        "tokens": tokens,
        "heads": 12,
        "head_dim": 128,
        "dtype": "f32",
        "threads": args.threads,
        "density": args.density,
        "repeats": args.repeats,
        "cpu": cpu_model(),
        "isa": cpu_isa(),
        "torch": torch.__version__,
        "uptime_before": load_before,
        "uptime_after": uptime(),
    }
    for mode, result in results.items():
        summary[mode] = {
            "block_s": result["block_s"],
            "self_attention_s": result["self_attention_s"],
            "cross_attention_s": result["cross_attention_s"],
            "attention_share": result["self_attention_s"] / result["block_s"],
            "block_runs_s": result["block_runs_s"],
            "self_attention_runs_s": result["self_attention_runs_s"],
        }
        if "layer_report" in result:
            summary[mode]["layer_report"] = result["layer_report"]
    if heads:
        summary["heads_choice"] = [head["choice"] for head in heads]
        summary["heads_density"] = [head["density"] for head in heads]
    if len(results) == 2:
        native, sparse = results["native"], results["tilesplash"]
        summary["block_speedup"] = native["block_s"] / sparse["block_s"]
        summary["attention_speedup"] = native["self_attention_s"] / sparse["self_attention_s"]
        summary["cosine"] = float(torch.nn.functional.cosine_similarity(native["output"], sparse["output"], dim=0))
        summary["targets"] = {"block_speedup": 1.8, "attention_speedup": 3.5}

    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(format_summary(summary))
    return summary


def format_summary(s: dict) -> str:
    lines = [
        f"Wan 2.1 1.3B block: {s['frames']} x {s['height']} x {s['width']} = {s['tokens']} tokens, 12 heads x 128, "
        f"f32, {s['threads']} threads, {s['cpu']} ({s['isa']}), torch {s['torch']}",
        f"load: before [{s['uptime_before']}]",
        f"      after  [{s['uptime_after']}]",
        "",
        f"{'mode':<12}{'block_s':>10}{'attention_s':>13}{'share':>8}",
    ]
    for mode in ("native", "tilesplash"):
        if mode in s:
            m = s[mode]
            lines.append(f"{mode:<12}{m['block_s']:>10.2f}{m['self_attention_s']:>13.2f}{m['attention_share']:>7.0%}")
    if "heads_choice" in s:
        counts = {c: s["heads_choice"].count(c) for c in ("dense", "spatial", "temporal")}
        density = statistics.mean(s["heads_density"])
        lines.append(
            f"\nheads: {counts['spatial']} spatial, {counts['temporal']} temporal, {counts['dense']} dense; "
            f"mean density {density:.3f} (target {s['density']})"
        )
    if "block_speedup" in s:
        t = s["targets"]
        lines.append(
            f"speed-up: block {s['block_speedup']:.2f}x (floor {t['block_speedup']}x), "
            f"attention {s['attention_speedup']:.2f}x (floor {t['attention_speedup']}x); "
            f"cosine of block outputs {s['cosine']:.5f}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main(sys.argv[1:])
