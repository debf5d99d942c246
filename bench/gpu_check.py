"""The measurements of bench/gpu_check.sh, printed as one JSON object.

    python bench/gpu_check.py                       # on a CUDA GPU (what gpu_check.sh runs)
    python bench/gpu_check.py --device cpu --tiny   # dry run: every part, tiny shapes, eager

(a) Wan 2.1 480p (12 heads) and 720p (40 heads), d 128, bf16: dense SDPA (its
    flash backend) against tilesplash at 25% density, routed (VideoAttention on
    the CUDA tensors: the router, permuted temporal heads, the sink merged), same run;
(b) the BlockMasks of those routed layers built from tilesplash's plans against
    create_block_mask(_compile=True, warm) on the same masks, block lists compared;
(c) one Wan 2.1 1.3B block at 480p (random weights): diffusers native against
    tilesplash.diffusers.enable().
Times are medians of `--repeats` runs after a warm-up (compiles included in
the warm-up, reported apart), with the device synchronised.
"""

from __future__ import annotations

import argparse
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

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))  # loaded by path in tests
from block_mask_compare import same_lists  # noqa: E402

WAN = {"480p": (21, 30, 52, 12), "720p": (21, 45, 80, 40)}
TINY = {"480p": (4, 6, 8, 3), "720p": (4, 8, 10, 4)}


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


def routed_layer(name, shape, device, dtype, repeats, compile_masks):
    frames, height, width, heads = shape
    g = tilesplash.VideoGeometry(frames, height, width)
    n, d = g.tokens, (128 if device.type == "cuda" else 32)
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, n, heads, d, generator=gen).to(device, dtype) for _ in range(3))
    layer = tilesplash.VideoAttention(g, density=0.25, sink=True, backend="flex")
    backend = "flash"
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        kernel = sdpa_kernel(SDPBackend.FLASH_ATTENTION) if device.type == "cuda" else None
    except ImportError:  # pragma: no cover
        kernel = None
    if kernel is None:
        backend = "default"
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

    def dense():
        if kernel is not None:
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)
        return torch.nn.functional.scaled_dot_product_attention(qt, kt, vt)

    report = {}

    def sparse():
        report["last"] = layer(q, k, v, layer=1, step=5)[1]

    with torch.no_grad():
        sdpa, sdpa_first = timed(dense, device, repeats)
        ours, ours_first = timed(sparse, device, repeats)
    r = report["last"]
    choices = [h["choice"] for h in r["heads"]]
    result = {
        "tokens": n, "heads": heads, "head_dim": d, "dtype": str(dtype).removeprefix("torch."),
        "sdpa_backend": backend, "sdpa_ms": 1e3 * sdpa, "tilesplash_ms": 1e3 * ours,
        "speedup": sdpa / ours, "tilesplash_first_call_s": ours_first,
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


def wan_block(device, dtype, tiny, repeats):
    from diffusers import WanTransformer3DModel

    import tilesplash.diffusers as tsd

    if tiny:
        config = dict(num_attention_heads=2, attention_head_dim=32, in_channels=4, out_channels=4,
                      text_dim=32, freq_dim=32, ffn_dim=64, rope_max_seq_len=64)
        latent, text_tokens = (4, 12, 16), 8
    else:  # Wan 2.1 1.3B's configuration, one block
        config = dict(num_attention_heads=12, attention_head_dim=128, in_channels=16,
                      out_channels=16, text_dim=4096, freq_dim=256, ffn_dim=8960,
                      cross_attn_norm=True, qk_norm="rms_norm_across_heads", eps=1e-6,
                      rope_max_seq_len=1024)
        latent, text_tokens = (21, 60, 104), 512
    torch.manual_seed(0)
    model = WanTransformer3DModel(patch_size=(1, 2, 2), num_layers=1, **config)
    model = model.to(device, dtype).eval()
    gen = torch.Generator().manual_seed(1)
    hidden = torch.randn(1, config["in_channels"], *latent, generator=gen).to(device, dtype)
    text = torch.randn(1, text_tokens, config["text_dim"], generator=gen).to(device, dtype)
    timestep = torch.full((1,), 500.0, device=device)

    def run():
        with torch.no_grad():
            return model(hidden_states=hidden, timestep=timestep, encoder_hidden_states=text,
                         return_dict=False)[0]

    native_s, _ = timed(run, device, repeats)
    native = run()
    handle = tsd.enable(model, density=0.25, dense_layers=0, backend="flex")
    try:
        ours_s, ours_first = timed(run, device, repeats)
        sparse = run()
        choices = [h["choice"] for h in handle.report()[-1]["heads"]]
    finally:
        handle.remove()
    restored = bool(torch.equal(run(), native))
    error = float((sparse.float() - native.float()).abs().max() / native.float().abs().max())
    return {"tokens": latent[0] * latent[1] // 2 * latent[2] // 2, "native_ms": 1e3 * native_s,
            "enable_ms": 1e3 * ours_s, "speedup": native_s / ours_s,
            "enable_first_call_s": ours_first, "choices": {c: choices.count(c)
                                                            for c in sorted(set(choices))},
            "relative_difference_to_native": error, "remove_restores_bits": restored}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="tiny shapes (a dry run)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--pytest-summary", default=None,
                        help="the gpu-marked tests' summary line, copied into the JSON")
    parser.add_argument("--skip", default="", help="comma-separated parts to skip: a, b, c")
    parser.add_argument("--partial", default=None,
                        help="rewrite this file with the JSON so far after every part (what "
                             "survives a run stopped by its time limit)")
    args = parser.parse_args(argv)

    def checkpoint():
        if args.partial:
            with open(args.partial, "w") as f:
                json.dump(out, f, indent=1, default=str)

    device = torch.device(args.device)
    dtype = torch.bfloat16
    out = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
           "torch": torch.__version__, "tilesplash": tilesplash.__version__, "tiny": args.tiny,
           "pytest_gpu": args.pytest_summary}
    skip = set(filter(None, args.skip.split(",")))
    shapes = TINY if args.tiny else WAN
    compile_masks = device.type == "cuda" or not args.tiny
    for part in ("a", "b"):
        out[part] = {} if part not in skip else "skipped"
    if "a" not in skip or "b" not in skip:
        for name, shape in shapes.items():
            try:
                a, b = routed_layer(name, shape, device, dtype, args.repeats, compile_masks)
            except Exception as error:  # noqa: BLE001 - one failed part must not hide the others
                a = b = {"error": f"{type(error).__name__}: {error}"}
            if isinstance(out["a"], dict):
                out["a"][name] = a
            if isinstance(out["b"], dict):
                out["b"][name] = b
            checkpoint()
    if "c" in skip:
        out["c"] = "skipped"
    else:
        try:
            out["c"] = wan_block(device, dtype, args.tiny, max(1, args.repeats // 2))
        except Exception as error:  # noqa: BLE001
            out["c"] = {"error": f"{type(error).__name__}: {error}"}
    json.dump(out, sys.stdout, indent=1, default=lambda x: None if isinstance(x, float) and
              math.isnan(x) else str(x))
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
