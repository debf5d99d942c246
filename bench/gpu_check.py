"""The measurements of bench/gpu_check.sh: one JSON line per part as it ends ({"part",
"seconds" since the start, "result", "kernel_options" chosen so far}), then the
whole as one JSON object on the last line.

    python bench/gpu_check.py                       # on a CUDA GPU (what gpu_check.sh runs)
    python bench/gpu_check.py --device cpu --tiny   # dry run: every part, tiny shapes, eager

(band) one 25% band |q - k| <= W over Wan 480p's 32,760 tokens, 12 heads, d 128,
    bf16: dense SDPA's flash and cuDNN backends (the faster is "dense"),
    FlexAttention with create_block_mask's BlockMask of the analytic band, and
    tilesplash.attention(mask=local(W, W)) on the same tensors (its per-row
    mask_mod), and the same plan with the bitmask-table mask_mod, same run;
(a) Wan 2.1 480p (12 heads) and 720p (40 heads), d 128, bf16: dense SDPA against
    tilesplash at 25% density, routed (VideoAttention on the CUDA tensors: the
    router, permuted temporal heads, the sink merged), routing and attention apart;
(b) the BlockMasks of those routed layers built from tilesplash's plans against
    create_block_mask(_compile=True, warm) on the same masks, block lists compared;
(c) one Wan 2.1 1.3B block at 480p and 720p (random weights): diffusers native
    against tilesplash.diffusers.enable(), and the compiles a 10-step run of it makes;
(t) tile-granular masks (granularity="tile", docs/masks.md): the band of (band)
    rounded out to 128-tiles, and the routed Wan 480p layer of (a) at "token" and
    "tile" granularity, same tensors, same run: times, first calls, compiles,
    densities and the partial blocks of each BlockMask (0: no mask_mod runs);
(g) grad mode: a routed VideoAttention(backend="flex") forward on inputs that require
    grad and its backward, against dense autograd (SDPA with each head's mask written
    out, float32) on the same inputs: the largest relative errors of the output and
    of dq, dk, dv. On CPU tensors (the dry run) the backward must raise naming the
    backend, and the harness checks itself on the dense reference.
Times are medians of `--repeats` runs after a warm-up (compiles included in the
warm-up, reported apart as first-call seconds), with the device synchronised; every
timed routed call is a new layer and step (new sampled rows and choices, as a
diffusers run makes them), and every timed block call a new timestep.
"kernel_options" lists the FlexAttention options tilesplash chose and ran.
Each part is guarded: a failing part records its error and the others still run.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import pathlib
import statistics
import sys
import time

import torch
from torch.nn.attention.flex_attention import create_block_mask

import tilesplash
import tilesplash.flex
from tilesplash._backends import BACKENDS

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # loaded by path in tests
from block_mask_compare import same_lists  # noqa: E402

WAN = {"480p": (21, 30, 52, 12), "720p": (21, 45, 80, 40)}
TINY = {"480p": (4, 6, 8, 3), "720p": (4, 8, 10, 4)}
BLOCK_LATENTS = {"480p": (21, 60, 104), "720p": (21, 90, 160)}  # Wan 1.3B's latent grids
TINY_BLOCK_LATENTS = {"480p": (4, 12, 16), "720p": (4, 16, 20)}


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(function, device, repeats):
    """(median seconds of `repeats` runs, seconds of the first, warm-up run)."""
    start = time.perf_counter()
    function()
    sync(device)
    first = time.perf_counter() - start
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        sync(device)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), first


def analytic_mask_mod(geometry, band, kinds, device):
    """What Sparse VideoGen hands create_block_mask: spatial (frame-major band) or
    temporal (token-major band) per head, each with the first-frame sink."""
    frames, per_frame = geometry.frames, geometry.tokens_per_frame
    temporal = torch.tensor([k == "temporal" for k in kinds], device=device)

    def mask_mod(b, h, q, k):
        qt = (q % per_frame) * frames + q // per_frame
        kt = (k % per_frame) * frames + k // per_frame
        distance = torch.where(temporal[h], (qt - kt).abs(), (q - k).abs())
        return (distance <= band) | (k < per_frame)

    return mask_mod


def compiles() -> int:
    """Graphs dynamo has compiled so far in this process (each is one kernel compile)."""
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def sdpa_backends(device):
    """{name: context manager factory} of the dense SDPA backends to time."""
    if device.type != "cuda":
        return {"default": contextlib.nullcontext}
    from torch.nn.attention import SDPBackend, sdpa_kernel

    found = {"flash": lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)}
    if hasattr(SDPBackend, "CUDNN_ATTENTION"):
        found["cudnn"] = lambda: sdpa_kernel(SDPBackend.CUDNN_ATTENTION)
    return found


def dense_sdpa(qt, kt, vt, device, repeats):
    """{backend: ms} of dense SDPA on [B, H, N, d] tensors, and the fastest as "dense"."""
    result = {}
    for name, context in sdpa_backends(device).items():
        def run(context=context):
            with context():
                return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)
        try:
            result[f"sdpa_{name}_ms"] = 1e3 * timed(run, device, repeats)[0]
        except RuntimeError as error:  # a backend this GPU or dtype lacks
            result[f"sdpa_{name}_error"] = str(error).splitlines()[0][:200]
    times = {k: v for k, v in result.items() if k.endswith("_ms")}
    result["dense"] = min(times, key=times.get).removesuffix("_ms").removeprefix("sdpa_")
    result["dense_ms"] = min(times.values())
    return result


def band_part(shape, device, dtype, repeats):
    """One 25% band: dense SDPA, FlexAttention + create_block_mask, tilesplash (flex)."""
    from torch.nn.attention.flex_attention import flex_attention

    frames, height, width, heads = shape
    n = frames * height * width
    d = 128 if device.type == "cuda" else 32
    band = round(n * (1 - math.sqrt(0.75)))  # keeps ~25% of the map
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, heads, n, d, generator=gen).to(device, dtype) for _ in range(3))
    result = {"tokens": n, "heads": heads, "head_dim": d, "band": band}
    result.update(dense_sdpa(q, k, v, device, repeats))
    mask = tilesplash.Mask.local(band, band)
    result["density"] = tilesplash.plan(mask, n, block_q=128, block_kv=128).stats()["density"]
    theirs = create_block_mask(lambda b, h, i, j: (i - j).abs() <= band, 1, 1, n, n,
                               device=device, BLOCK_SIZE=128, _compile=device.type == "cuda")
    compiled = torch.compile(flex_attention, dynamic=False, fullgraph=True)
    flex = lambda: compiled(q, k, v, block_mask=theirs)  # noqa: E731
    if device.type == "cuda":
        result["flex_create_block_mask_ms"], result["flex_first_call_s"] = (
            lambda t: (1e3 * t[0], t[1]))(timed(flex, device, repeats))
    before = compiles()
    ours = lambda: tilesplash.attention(q, k, v, mask=mask, backend="flex")  # noqa: E731
    ours_s, ours_first = timed(ours, device, repeats)
    result.update({"tilesplash_ms": 1e3 * ours_s, "tilesplash_first_call_s": ours_first,
                   "tilesplash_compiles": compiles() - before,
                   "speedup_vs_dense": result["dense_ms"] / (1e3 * ours_s)})
    # the same plan with the bitmask-table mask_mod (what masks with no row form run)
    table_bm = tilesplash.flex.block_mask(mask, n, device=device, mask_mod="table")
    table_s, table_first = timed(lambda: tilesplash.flex.run_flex(q, k, v, table_bm, None,
                                                                  return_lse=False),
                                 device, repeats)
    result.update({"tilesplash_table_ms": 1e3 * table_s,
                   "tilesplash_table_first_call_s": table_first})
    if "flex_create_block_mask_ms" in result:
        result["tilesplash_vs_flex"] = 1e3 * ours_s / result["flex_create_block_mask_ms"]
    return result


def routed_layer(name, shape, device, dtype, repeats, compile_masks):
    frames, height, width, heads = shape
    g = tilesplash.VideoGeometry(frames, height, width)
    n, d = g.tokens, (128 if device.type == "cuda" else 32)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, n, heads, d, generator=gen).to(device, dtype) for _ in range(3))
    layer = tilesplash.VideoAttention(g, density=0.25, sink=True, backend="flex")
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    report = {}

    calls = itertools.count()

    def sparse():
        # A new layer and step per call, as a diffusers run makes them: new sampled rows,
        # new routing choices, nothing reused from the call before.
        call = next(calls)
        report["last"] = layer(q, k, v, layer=1 + call % 30, step=5 + call // 30)[1]

    with torch.no_grad():
        dense = dense_sdpa(qt, kt, vt, device, repeats)
        before = compiles()
        ours, ours_first = timed(sparse, device, repeats)
    r = report["last"]
    choices = [h["choice"] for h in r["heads"]]
    result = {
        "tokens": n, "heads": heads, "head_dim": d, "dtype": str(dtype).removeprefix("torch."),
        **dense, "sdpa_ms": dense["dense_ms"], "tilesplash_ms": 1e3 * ours,
        "speedup": dense["dense_ms"] / (1e3 * ours), "tilesplash_first_call_s": ours_first,
        "tilesplash_compiles": compiles() - before,
        "routing_ms": 1e3 * r["routing_seconds"], "attention_ms": 1e3 * r["attention_seconds"],
        "choices": {c: choices.count(c) for c in sorted(set(choices))},
        "density": statistics.mean(h["density"] for h in r["heads"]),
        "tiles_visited": statistics.mean(h["tiles_visited"] for h in r["heads"]),
    }
    # (b) the same routed masks in the original order, as one [1, H, ...] BlockMask
    masks = [layer.mask(c) for c in choices]
    tilesplash.flex.clear_caches()
    start = time.perf_counter()
    ours_bm = tilesplash.flex.block_mask(masks, n, block_size=128, device=device)
    sync(device)
    plans_s = time.perf_counter() - start
    mask_mod = analytic_mask_mod(g, layer.band, choices, device)
    build = lambda: create_block_mask(mask_mod, 1, heads, n, n, device=device,  # noqa: E731
                                      BLOCK_SIZE=128, _compile=compile_masks)
    theirs_s, theirs_first = timed(build, device, 1)
    result_b = {"heads": heads, "from_plans_ms": 1e3 * plans_s,
                "create_block_mask_ms": 1e3 * theirs_s, "create_block_mask_first_s": theirs_first,
                "compiled": compile_masks, "ratio": theirs_s / plans_s,
                "same_block_lists": same_lists(ours_bm, build(), n, n, 128)}
    return result, result_b


def tile_part(shape, device, dtype, repeats):
    """(t): granularity "tile" against "token" on the band and the routed 480p layer."""
    frames, height, width, heads = shape
    g = tilesplash.VideoGeometry(frames, height, width)
    n, d = g.tokens, (128 if device.type == "cuda" else 32)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, n, heads, d, generator=gen).to(device, dtype) for _ in range(3))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    band = round(n * (1 - math.sqrt(0.75)))
    with torch.no_grad():
        result = {"tokens": n, "heads": heads, "head_dim": d, **dense_sdpa(qt, kt, vt, device,
                                                                          repeats)}
        rounded = tilesplash.Mask.local(band, band).tile_granular(n, n, 128, 128)
        before = compiles()
        band_s, band_first = timed(lambda: tilesplash.attention(
            qt, kt, vt, mask=rounded, backend="flex"), device, repeats)
        result["band_tile"] = {
            "density": tilesplash.plan(rounded, n, block_q=128, block_kv=128).stats()["density"],
            "tilesplash_ms": 1e3 * band_s, "first_call_s": band_first,
            "compiles": compiles() - before,
            "partial_blocks": int(tilesplash.flex.block_mask(
                rounded, n, device=device).kv_num_blocks.sum()),
            "speedup_vs_dense": result["dense_ms"] / (1e3 * band_s)}
        for granularity in ("token", "tile"):
            layer = tilesplash.VideoAttention(g, density=0.25, sink=True, backend="flex",
                                              granularity=granularity)
            report = {}

            def sparse(layer=layer, report=report, calls=itertools.count()):
                call = next(calls)  # a new layer and step per call
                report["last"] = layer(q, k, v, layer=1 + call % 30, step=5 + call // 30)[1]

            before = compiles()
            seconds, first = timed(sparse, device, repeats)
            r = report["last"]
            choices = [h["choice"] for h in r["heads"]]
            masks = layer._runner(BACKENDS["flex"]).block_masks(choices, device)
            result[granularity] = {
                "tilesplash_ms": 1e3 * seconds, "first_call_s": first,
                "compiles": compiles() - before, "routing_ms": 1e3 * r["routing_seconds"],
                "attention_ms": 1e3 * r["attention_seconds"],
                "speedup_vs_dense": result["dense_ms"] / (1e3 * seconds),
                "choices": {c: choices.count(c) for c in sorted(set(choices))},
                "density": statistics.mean(h["density"] for h in r["heads"]),
                "partial_blocks": [int(bm.kv_num_blocks.sum()) for bm in masks]}
    result["tile_speedup_vs_token"] = (result["token"]["tilesplash_ms"] /
                                       result["tile"]["tilesplash_ms"])
    return result


def wan_block(device, dtype, latent, tiny, repeats, steps=10):
    """One Wan 2.1 1.3B block (random weights) on `latent` (frames, height, width):
    native attention against enable(density=0.25), and the compiles a `steps`-step
    run of the enabled block makes (new routing choices are new data, not kernels)."""
    from diffusers import WanTransformer3DModel

    import tilesplash.diffusers as tsd

    if tiny:
        config = dict(num_attention_heads=2, attention_head_dim=32, in_channels=4, out_channels=4,
                      text_dim=32, freq_dim=32, ffn_dim=64, rope_max_seq_len=64)
        text_tokens = 8
    else:  # Wan 2.1 1.3B's configuration, one block
        config = dict(num_attention_heads=12, attention_head_dim=128, in_channels=16,
                      out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=8960,
                      cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6,
                      rope_max_seq_len=1024)
        text_tokens = 512
    torch.manual_seed(0)
    model = WanTransformer3DModel(patch_size=(1, 2, 2), num_layers=1, **config)
    model = model.to(device, dtype).eval()
    gen = torch.Generator().manual_seed(1)
    hidden = torch.randn(1, config["in_channels"], *latent, generator=gen).to(device, dtype)
    text = torch.randn(1, text_tokens, config["text_dim"], generator=gen).to(device, dtype)

    def run(t=500.0):
        with torch.no_grad():
            return model(hidden_states=hidden, timestep=torch.full((1,), t, device=device),
                         encoder_hidden_states=text, return_dict=False)[0]

    native_s, _ = timed(run, device, repeats)
    native = run()
    before = compiles()
    handle = tsd.enable(model, density=0.25, dense_layers=0, dense_steps=0, backend="flex")
    try:
        step_seconds = []
        for step in range(steps):  # a denoising run: a new timestep starts each step
            start = time.perf_counter()
            run(1000.0 - 100.0 * step)
            sync(device)
            step_seconds.append(time.perf_counter() - start)
        run_compiles = compiles() - before
        timesteps = itertools.count()  # a new step per call, as a denoising run makes
        ours_s, _ = timed(lambda: run(50.0 - 0.1 * next(timesteps)), device, repeats)
        sparse = run(1000.0 - 100.0 * (steps - 1))
        choices = [h["choice"] for h in handle.report()[-1]["heads"]]
    finally:
        handle.remove()
    restored = bool(torch.equal(run(), native))
    error = float((sparse.float() - native.float()).abs().max() / native.float().abs().max())
    return {"tokens": latent[0] * latent[1] // 2 * latent[2] // 2, "native_ms": 1e3 * native_s,
            "enable_ms": 1e3 * ours_s, "speedup": native_s / ours_s,
            "enable_first_call_s": step_seconds[0], "steps": steps,
            "compiles_in_steps": run_compiles,
            "later_step_ms": [round(1e3 * t, 3) for t in step_seconds[1:]],
            "choices": {c: choices.count(c) for c in sorted(set(choices))},
            "relative_difference_to_native": error, "remove_restores_bits": restored}


def grads_against_dense(run, q, k, v, masks, seed=0):
    """Relative errors (largest over out, dq, dk, dv, against their norms) of `run`'s
    output and input gradients, for q, k, v [B, N, H, d], against float32 autograd of
    SDPA under `masks` (bool [H, N, N], True: kept), the same upstream gradient."""
    upstream = torch.randn(q.shape[:-1] + (v.shape[-1],), generator=torch.Generator().manual_seed(seed))
    errors = {}
    results = []
    for function in (run, lambda a, b, c: torch.nn.functional.scaled_dot_product_attention(
            a.transpose(1, 2), b.transpose(1, 2), c.transpose(1, 2),
            attn_mask=masks.to(a.device)).transpose(1, 2)):
        inputs = [x.detach().float().clone().requires_grad_() if function is not run
                  else x.detach().clone().requires_grad_() for x in (q, k, v)]
        out = function(*inputs)
        (out.float() * upstream.to(out.device)).sum().backward()
        results.append([out.detach().float()] + [x.grad.float() for x in inputs])
    for name, got, want in zip(("out", "dq", "dk", "dv"), *results):
        errors[name] = float((got - want).norm() / want.norm().clamp_min(1e-30))
    return errors


def grad_part(device, dtype, tiny):
    frames, height, width, heads = (3, 8, 8, 2) if tiny else (4, 16, 16, 4)
    geometry = tilesplash.VideoGeometry(frames, height, width)
    n, d = geometry.tokens, 64
    layer = tilesplash.VideoAttention(geometry, density=0.3, backend="flex")
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, n, heads, d, generator=g).to(device, dtype) for _ in range(3))
    with torch.no_grad():
        _, report = layer(q, k, v, layer=1, step=10)
    choices = [head["choice"] for head in report["heads"]]
    masks = torch.stack([torch.ones(n, n, dtype=torch.bool) if c == "dense" else
                         torch.from_numpy(layer.mask(c).rows(range(n), n)) for c in choices])

    def run(a, b, c):
        return layer(a, b, c, layer=1, step=10)[0]

    # The harness on itself: dense autograd against dense autograd is exact.
    dense = lambda a, b, c: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
        a.transpose(1, 2), b.transpose(1, 2), c.transpose(1, 2),
        attn_mask=masks.to(a.device)).transpose(1, 2)
    harness = grads_against_dense(dense, q.float(), k.float(), v.float(), masks)
    result = {"heads": choices, "tokens": n, "harness": harness}
    if device.type != "cuda":
        try:
            grads_against_dense(run, q, k, v, masks)
        except RuntimeError as error:
            result["backward"] = f"refused as expected: {str(error)[:200]}"
        else:
            result["backward"] = "ERROR: a CPU backward ran (there is none)"
        return result
    result["errors"] = grads_against_dense(run, q, k, v, masks)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes (a dry run)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pytest-summary", default=None,
                        help="the gpu-marked tests' summary line, copied into the JSON")
    parser.add_argument("--skip", default="",
                        help="comma-separated parts to skip: band, a, b, c, t, g")
    parser.add_argument("--partial", default=None,
                        help="rewrite this file with the JSON so far after every part (what "
                             "survives a run stopped by its time limit)")
    args = parser.parse_args(argv)

    started = time.perf_counter()

    def checkpoint(part=None):
        """After a part: its JSON line on stdout at once (what a run stopped by its time
        limit has printed), with the kernel options chosen so far, and the whole so far
        in --partial."""
        if part is not None:
            line = {"part": part, "seconds": round(time.perf_counter() - started, 1),
                    "result": out[part], "kernel_options": kernel_options()}
            print(json.dumps(line, default=_json_default), flush=True)
        if args.partial:
            with open(args.partial, "w") as f:
                json.dump(out, f, indent=1, default=str)

    def guarded(function, *arguments):
        """One part's result, or its error: one failed part must not hide the others."""
        try:
            return function(*arguments)
        except Exception as error:  # noqa: BLE001
            return {"error": f"{type(error).__name__}: {str(error)[:2000]}"}

    device = torch.device(args.device)
    dtype = torch.bfloat16
    out = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
           "torch": torch.__version__, "tilesplash": tilesplash.__version__, "tiny": args.tiny,
           "pytest_gpu": args.pytest_summary}
    skip = set(filter(None, args.skip.split(",")))
    shapes = TINY if args.tiny else WAN
    compile_masks = device.type == "cuda" or not args.tiny
    out["band"] = ("skipped" if "band" in skip else
                   guarded(band_part, shapes["480p"], device, dtype, args.repeats))
    checkpoint("band")
    for part in ("a", "b"):
        out[part] = {} if part not in skip else "skipped"
    if "a" not in skip or "b" not in skip:
        for name, shape in shapes.items():
            result = guarded(routed_layer, name, shape, device, dtype, args.repeats,
                             compile_masks)
            a, b = (result, result) if isinstance(result, dict) else result
            if isinstance(out["a"], dict):
                out["a"][name] = a
            if isinstance(out["b"], dict):
                out["b"][name] = b
            checkpoint()
    checkpoint("a")
    checkpoint("b")
    out["c"] = {} if "c" not in skip else "skipped"
    if "c" not in skip:
        latents = TINY_BLOCK_LATENTS if args.tiny else BLOCK_LATENTS
        for name, latent in latents.items():
            out["c"][name] = guarded(wan_block, device, dtype, latent, args.tiny,
                                     max(1, args.repeats // 2))
            checkpoint()
    checkpoint("c")
    out["t"] = ("skipped" if "t" in skip else
                guarded(tile_part, shapes["480p"], device, dtype, args.repeats))
    checkpoint("t")
    out["g"] = "skipped" if "g" in skip else guarded(grad_part, device, dtype, args.tiny)
    checkpoint("g")
    out["kernel_options"] = kernel_options()
    out["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(out, default=_json_default), flush=True)  # the whole, last line
    return 0


def kernel_options():
    return [{"context": list(map(str, context)), "options": options}
            for context, options in tilesplash.flex.kernel_options_used()]


def _json_default(x):
    return None if isinstance(x, float) and math.isnan(x) else str(x)


if __name__ == "__main__":
    sys.exit(main())
