#!/usr/bin/env python3
"""One transformer block of a video model: diffusers' native attention against tilesplash, same run.

--model wan (default): a one-layer WanTransformer3DModel with Wan 2.1 1.3B's
shapes (12 heads x 128, ffn 8960, text 4096) on 21 latent frames x 30 x 52
(480p: 32,760 tokens). --model hunyuan: HunyuanVideo's single-stream block
(24 heads x 128) at its 480p shape, 33 x 30 x 53 = 52,470 video tokens and
256 text slots after them (--prompt-tokens real, the rest padding that both
modes mask). --model ltx: an LTX-Video 0.9 block (32 heads x 64) at 512 x 768,
121 frames: 16 x 16 x 24 = 6,144 tokens. Random weights, f32 (bench/block_models.py).
Each runs with diffusers' own attention (PyTorch SDPA) and with
tilesplash.diffusers at 25% density, every head routed. Forwards alternate
(native, tilesplash, native, ...) so a change of load falls on both modes
alike; `other_s` (block minus self-attention: the same code in both modes)
shows whether it did. Timings are medians over --repeats forwards per mode.

    python bench/wan_block.py                        # Wan 480p: ~2 min a pair on a quiet 2-core Zen 3
    python bench/wan_block.py --tokens 8190          # 21 x 15 x 26, a quick check
    python bench/wan_block.py --model hunyuan        # HunyuanVideo 480p
    python bench/wan_block.py --model ltx --repeats 3
    python bench/wan_block.py --frames 5 --height 8 --width 16 --repeats 3 --json
    python bench/wan_block.py --tokens 8190 --error 0.3 --report wan.json --plot wan.png

--error E: a third mode after the pair, enable(..., error=E); its report to
--report (JSON), its picture to --plot, and its self-attention relative L2
error against native (last forwards) next to --density's.

Measured: the block (self-attention, cross-attention or the text stream, FFN,
norms), its self-attention module (projections, q/k norms, RoPE, attention,
output projection) and the attention call itself (diffusers'
dispatch_attention_fn in both modes: SDPA with its layout permutes, or the
tilesplash backend with routing and permutation). For tilesplash, where its
time went: routing, plan building, temporal heads' permutation, the kernel,
and the Python/binding layer; and whether q, k, v were read in place (no
layout copy). Kernel GFLOP/s count 4*d flops per kept pair (native: every
pair). Cosines compare the block outputs and the self-attention outputs of
the last forward of each mode.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

import torch

from block_models import MODELS, shape_for_tokens
from block_timers import Timers, cpu_model, uptime

TARGETS = {"block_speedup": 1.8, "attention_speedup": 3.5}


def forward_once(model, inputs, timers: Timers, handle=None) -> dict:
    timers.reset()
    with torch.inference_mode():
        model(**inputs, return_dict=False)
    run = {
        "block_s": timers.block,
        "attn1_s": timers.attn1,
        "self_attention_s": timers.self_attention,
        "cross_attention_s": timers.cross_attention,
        "block_output": timers.block_output,
        "attn1_output": timers.attn1_output,
    }
    if handle is not None:  # the dispatcher's clock as for native; the library's split from its report
        run["report"] = handle.report()[-1]
        handle.clear_report()
    run["other_s"] = run["block_s"] - run["self_attention_s"]
    return run


def median_of(runs: list[dict], key: str) -> float:
    return statistics.median(run[key] for run in runs)


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a, b, dim=0))


def breakdown(runs: list[dict], spec, tokens: int, native_attention_s: float | None) -> dict:
    """Where tilesplash's attention time went (medians over forwards) and the kernel's rate."""
    reports = [run["report"] for run in runs]
    med = lambda key: statistics.median(r[key] for r in reports)  # noqa: E731
    kernel = statistics.median(r["attention_seconds"] - r["permute_seconds"] for r in reports)
    library = med("total_seconds")
    heads = reports[-1]["heads"]
    kept_pairs = sum(head["density"] for head in heads) * tokens * tokens
    out = {
        "routing_s": med("routing_seconds"),
        "plan_s": med("plan_seconds"),
        "permute_s": med("permute_seconds"),
        "kernel_s": kernel,
        "library_s": library,
        "python_binding_s": statistics.median(r["seconds"] - r["total_seconds"] for r in reports),
        "kept_pairs": kept_pairs,
        "kernel_gflops": 4 * spec.head_dim * kept_pairs / kernel / 1e9,
        "block_q": reports[-1]["block_q"],
        "block_kv": reports[-1]["block_kv"],
        "blocks_tuned": reports[-1]["blocks_tuned"],
        "band": reports[-1]["band"],
        "choices": [head["choice"] for head in heads],
        "densities": [head["density"] for head in heads],
    }
    if native_attention_s:
        dense_pairs = spec.heads * tokens * tokens
        out["native_gflops"] = 4 * spec.head_dim * dense_pairs / native_attention_s / 1e9
        # The attention speed-up if tilesplash's kernel ran kept pairs at SDPA's rate and nothing else cost.
        out["ideal_attention_speedup"] = dense_pairs / kept_pairs
    return out


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="wan",
                        help="wan (Wan 2.1 1.3B, default), hunyuan (HunyuanVideo) or ltx (LTX-Video)")
    shape = parser.add_mutually_exclusive_group()
    shape.add_argument("--tokens", type=int, help="about this many video tokens: the model's frames and aspect")
    shape.add_argument("--frames", type=int, help="latent frames (with --height, --width: tokens after patching)")
    parser.add_argument("--height", type=int, help="tokens per column after patching (default: the model's)")
    parser.add_argument("--width", type=int, help="tokens per row after patching (default: the model's)")
    parser.add_argument("--prompt-tokens", type=int, default=160,
                        help="hunyuan, ltx: the prompt's real tokens, the rest of the slots padding (default 160)")
    parser.add_argument("--density", type=float, default=0.25, help="tilesplash density (default 0.25)")
    parser.add_argument("--error", type=float, default=None,
                        help="also run an error target (enable(..., error=E)) after the density pair")
    parser.add_argument("--report", default=None, help="with --error: write its handle's report here (JSON)")
    parser.add_argument("--plot", default=None, help="with --error: write its picture here (PNG, matplotlib)")
    parser.add_argument("--precision", choices=("default", "int8"), default="default",
                        help="tilesplash's Q.K^T precision: the inputs' (default) or int8")
    parser.add_argument("--threads", type=int, default=2, help="PyTorch and tilesplash threads (default 2)")
    parser.add_argument("--repeats", type=int, default=1, help="forwards per mode; medians are reported (default 1)")
    parser.add_argument("--mode", choices=("both", "native", "tilesplash"), default="both")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    spec = MODELS[args.model]
    frames, height, width = spec.shape
    if args.tokens is not None:
        if args.tokens < frames:
            parser.error(f"--tokens must be >= {frames} ({frames} latent frames)")
        frames, height, width = shape_for_tokens(spec, args.tokens)
    args.frames = args.frames or frames
    args.height = args.height or height
    args.width = args.width or width
    for name in ("frames", "height", "width", "threads", "repeats", "prompt_tokens"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if not 0.0 < args.density <= 1.0:
        parser.error("--density must be in (0, 1]")
    if args.error is not None and not 0.0 < args.error < float("inf"):
        parser.error(f"--error must be a relative L2 error > 0, got {args.error}")
    if args.error is None and (args.report or args.plot):
        parser.error("--report and --plot write the error target's report: give --error too")
    if args.report and args.plot and os.path.realpath(args.report) == os.path.realpath(args.plot):
        parser.error("--report and --plot: expected two different files, got the same path twice")
    if args.error is not None and args.mode != "both":
        parser.error("--error compares against native and --density: it needs --mode both")
    return args


def relative_l2(sparse: torch.Tensor, native: torch.Tensor) -> float:
    """||sparse - native|| / ||native|| in float64 (the sampled error's definition, on every row)."""
    a, b = sparse.double(), native.double()
    return float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b))


def run_error_target(model, inputs, timers, args, log) -> tuple[list[dict], list[dict]]:
    """--error: forwards with an error-target handle; its runs and its whole report
    (written to --report and drawn to --plot when given)."""
    import tilesplash.diffusers

    handle = tilesplash.diffusers.enable(
        model, error=args.error, dense_layers=0, dense_steps=0, threads=args.threads,
        precision=args.precision,
    )
    runs, report = [], []
    try:
        for repeat in range(args.repeats):
            handle.set_step(repeat)
            timers.reset()
            run = forward_once(model, inputs, timers, None)
            report += handle.report()
            run["report"] = handle.report()[-1]
            handle.clear_report()
            runs.append(run)
            log(f"error target forward {repeat + 1}/{args.repeats}: block {run['block_s']:.2f} s, "
                f"self-attention {run['self_attention_s']:.2f} s; {uptime()}")
    finally:
        handle.remove()
    if args.report:
        with open(args.report, "w") as f:
            json.dump(report, f, indent=1)
    if args.plot:
        tilesplash.diffusers.plot(report, args.plot)
    return runs, report
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    spec = MODELS[args.model]
    log = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    model = spec.build().eval()
    shape = (args.frames, args.height, args.width)
    inputs = spec.inputs(shape, torch.Generator().manual_seed(args.seed), args.prompt_tokens)
    video = args.frames * args.height * args.width
    tokens = video + spec.text  # the self-attention sequence
    load_before = uptime()
    log(f"{spec.label}, {args.frames} x {args.height} x {args.width} = {video} video tokens"
        + (f" + {spec.text} text slots ({args.prompt_tokens} real)" if spec.text else "")
        + f", {args.threads} threads, f32; {load_before}")

    modes = ["native", "tilesplash"] if args.mode == "both" else [args.mode]
    attention = getattr(spec.block(model), spec.attention)
    processors = {"native": attention.processor}
    handle = None
    timers = Timers(model, spec)
    runs: dict[str, list[dict]] = {mode: [] for mode in modes}
    try:
        if "tilesplash" in modes:
            import tilesplash.diffusers
            from tilesplash.diffusers._runtime import Runtime

            timers.watch_layout(Runtime)
            # One handle for the whole run (plans are built on its first call and
            # kept, as in a real denoising loop); the modes swap processors.
            handle = tilesplash.diffusers.enable(
                model, density=args.density, dense_layers=0, dense_steps=0, threads=args.threads,
                precision=args.precision,
            )
            processors["tilesplash"] = attention.processor
        for repeat in range(args.repeats):
            for mode in modes:
                attention.set_processor(processors[mode])
                run = forward_once(model, inputs, timers, handle if mode == "tilesplash" else None)
                runs[mode].append(run)
                log(f"{mode} forward {repeat + 1}/{args.repeats}: block {run['block_s']:.2f} s, "
                    f"self-attention {run['self_attention_s']:.2f} s; {uptime()}")
        if handle is not None:
            handle.remove()
            handle = None
        if args.error is not None:
            runs["error"], error_report = run_error_target(model, inputs, timers, args, log)
    finally:
        if handle is not None:
            handle.remove()
        timers.close()

    import tilesplash

    summary = {
        "benchmark": spec.label,
        "model": spec.name,
        "command": " ".join([os.path.basename(sys.argv[0]) or "wan_block.py", *(argv or [])]),
        "frames": args.frames,
        "height": args.height,
        "width": args.width,
        "video_tokens": video,
        "text_tokens": spec.text,
        "prompt_tokens": args.prompt_tokens if spec.text else None,
        "tokens": tokens,
        "heads": spec.heads,
        "head_dim": spec.head_dim,
        "dtype": "f32",
        "threads": args.threads,
        "density": args.density,
        "precision": args.precision,
        "repeats": args.repeats,
        "cpu": cpu_model(),
        "isa": tilesplash.active_isa(),
        "torch": torch.__version__,
        "uptime_before": load_before,
        "uptime_after": uptime(),
    }
    for mode, mode_runs in runs.items():
        block = median_of(mode_runs, "block_s")
        attention_s = median_of(mode_runs, "self_attention_s")
        summary[mode] = {
            "block_s": block,
            "attn1_s": median_of(mode_runs, "attn1_s"),
            "self_attention_s": attention_s,
            "cross_attention_s": median_of(mode_runs, "cross_attention_s"),
            "other_s": median_of(mode_runs, "other_s"),
            "attention_share": attention_s / block,
            "block_runs_s": [run["block_s"] for run in mode_runs],
            "self_attention_runs_s": [run["self_attention_s"] for run in mode_runs],
        }
    if "tilesplash" in runs:
        native_s = summary["native"]["self_attention_s"] if "native" in runs else None
        summary["tilesplash"]["breakdown"] = breakdown(runs["tilesplash"], spec, tokens, native_s)
        summary["tilesplash"]["read_in_place"] = timers.in_place
    if "native" in runs and "tilesplash" in runs:
        native, sparse = summary["native"], summary["tilesplash"]
        summary["block_speedup"] = native["block_s"] / sparse["block_s"]
        summary["attention_speedup"] = native["self_attention_s"] / sparse["self_attention_s"]
        summary["other_ratio"] = sparse["other_s"] / native["other_s"]
        last_native, last_sparse = runs["native"][-1], runs["tilesplash"][-1]
        summary["cosine_block"] = cosine(last_native["block_output"], last_sparse["block_output"])
        summary["cosine_self_attention"] = cosine(last_native["attn1_output"], last_sparse["attn1_output"])
        summary["targets"] = TARGETS
        summary["self_attention_error"] = relative_l2(last_sparse["attn1_output"], last_native["attn1_output"])
    if "error" in runs:
        last = runs["error"][-1]
        heads = last["report"]["heads"]
        summary["error_target"] = {
            "error": args.error,
            "block_s": median_of(runs["error"], "block_s"),
            "self_attention_s": median_of(runs["error"], "self_attention_s"),
            "routing_s": statistics.median(run["report"]["routing_seconds"] for run in runs["error"]),
            "mean_density": statistics.mean(head["density"] for head in heads),
            "mean_sampled_error": statistics.mean(
                [h["error"] for h in heads if h.get("error") is not None] or [float("nan")]),
            "target_missed": sum(head.get("target_met", True) is False for head in heads),
            "choices": [head["choice"] for head in heads],
            "self_attention_error": relative_l2(last["attn1_output"], runs["native"][-1]["attn1_output"]),
            "cosine_self_attention": cosine(last["attn1_output"], runs["native"][-1]["attn1_output"]),
            "attention_speedup": summary["native"]["self_attention_s"] / median_of(runs["error"], "self_attention_s"),
            "summary": tilesplash.diffusers.summarize(error_report),
            "report": args.report,
            "plot": args.plot,
        }

    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(format_summary(summary))
    return summary


def format_summary(s: dict) -> str:
    lines = [
        f"{s['benchmark']}: {s['frames']} x {s['height']} x {s['width']} = {s['video_tokens']} video tokens"
        + (f" + {s['text_tokens']} text ({s['prompt_tokens']} real)" if s["text_tokens"] else "") + ", "
        f"{s['heads']} heads x {s['head_dim']}, f32"
        f"{', tilesplash Q.K^T in int8' if s['precision'] == 'int8' else ''}, {s['threads']} threads, {s['cpu']} ({s['isa']}), "
        f"torch {s['torch']}, {s['repeats']} forward(s) per mode, medians",
        f"load: before [{s['uptime_before']}]",
        f"      after  [{s['uptime_after']}]",
        "",
        f"{'mode':<12}{'block_s':>10}{'attn1_s':>10}{'attention_s':>13}{'share':>8}{'other_s':>10}",
    ]
    for mode in ("native", "tilesplash"):
        if mode in s:
            m = s[mode]
            lines.append(
                f"{mode:<12}{m['block_s']:>10.2f}{m['attn1_s']:>10.2f}{m['self_attention_s']:>13.2f}"
                f"{m['attention_share']:>8.0%}{m['other_s']:>10.2f}"
            )
    if "tilesplash" in s:
        b = s["tilesplash"]["breakdown"]
        counts = {c: b["choices"].count(c) for c in ("dense", "spatial", "temporal")}
        lines += [
            "",
            f"heads: {counts['spatial']} spatial, {counts['temporal']} temporal, {counts['dense']} dense; "
            f"mean density {statistics.mean(b['densities']):.3f} (target {s['density']}), band {b['band']} tokens, "
            f"tiles {b['block_q']} x {b['block_kv']} ({'tuned' if b['blocks_tuned'] else 'heuristic'})",
            "tilesplash attention time: "
            + ", ".join(
                f"{name} {b[key]:.3f} s"
                for name, key in (("routing", "routing_s"), ("plan", "plan_s"), ("permutation", "permute_s"),
                                  ("kernel", "kernel_s"), ("python+binding", "python_binding_s"))
            ),
            f"read in place (no layout copy): {s['tilesplash']['read_in_place']}",
            f"kernel {b['kernel_gflops']:.1f} GFLOP/s on kept pairs"
            + (f"; native SDPA {b['native_gflops']:.1f} GFLOP/s on all pairs; ideal attention speed-up "
               f"at this density {b['ideal_attention_speedup']:.2f}x" if "native_gflops" in b else ""),
        ]
    if "block_speedup" in s:
        t = s["targets"]
        lines += [
            "",
            f"speed-up: block {s['block_speedup']:.2f}x (floor {t['block_speedup']}x where attention is "
            f">= 60% of the native block; here {s['native']['attention_share']:.0%}), "
            f"attention {s['attention_speedup']:.2f}x (floor {t['attention_speedup']}x)",
            f"cosine against native: block output {s['cosine_block']:.6f}, "
            f"self-attention output {s['cosine_self_attention']:.6f}",
        ]
        lines.append(f"self-attention relative L2 error against native: density {s['density']} "
                     f"{s['self_attention_error']:.4f}")
    if "error_target" in s:
        e = s["error_target"]
        lines += [
            f"error target {e['error']}: self-attention relative L2 error against native "
            f"{e['self_attention_error']:.4f} (density {s['density']}: {s['self_attention_error']:.4f}); "
            f"mean density {e['mean_density']:.3f}, mean sampled error {e['mean_sampled_error']:.4f}, "
            f"{e['target_missed']} heads missed the target; self-attention {e['self_attention_s']:.2f} s "
            f"({e['attention_speedup']:.2f}x native), routing {e['routing_s']:.3f} s",
            "choices: " + ", ".join(e["choices"]),
        ]
        if e["report"] or e["plot"]:
            lines.append("written: " + ", ".join(p for p in (e["report"], e["plot"]) if p))
    if "block_speedup" in s:
        if abs(s["other_ratio"] - 1) > 0.1:
            lines.append(
                f"warning: the block's other work (same code in both modes) took {s['other_ratio']:.2f}x as long "
                "with tilesplash: the load changed during the run; rerun on a quiet machine"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main(sys.argv[1:])
