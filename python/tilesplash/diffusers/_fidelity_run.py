"""``fidelity``: a pipeline run dense and sparse from one seed, and the picture of the result.

The metrics themselves (PSNR, SSIM, LPIPS, the report's attention error)
are in ``_fidelity``; this module only drives the two runs and draws.
"""

from __future__ import annotations

import math

from ._fidelity import Fidelity, attention_rows, compare_videos, lpips_scorer

_WHO = "tilesplash.diffusers.fidelity"
# What fidelity sets on every call itself: the same seed for both runs, and
# decoded frames as floats in [0, 1].
_OWN_ARGUMENTS = ("generator", "output_type")


def fidelity(pipe, call: dict, *, seed: int = 0, lpips: bool | None = None, **enable_options) -> Fidelity:
    """Run ``pipe(**call)`` dense (diffusers' own attention), then with
    ``tilesplash.diffusers.enable(pipe, **enable_options)``, both from ``seed``
    (a CPU ``torch.Generator``) with ``output_type="np"``; compare the frames.

    call: the pipeline's arguments (prompt or prompt embeddings, height, width,
        num_frames, num_inference_steps, guidance ...), without ``generator``
        and ``output_type``, which fidelity sets.
    seed: the generator's seed, the same for both runs.
    lpips: None: LPIPS too where the lpips package and its weights are
        installed (nothing is downloaded); True: required; False: skipped.
    enable_options: ``enable``'s keyword arguments (method, density, error,
        dense_steps, dense_layers, ...); the field's protocol keeps the first
        20% of the steps and layer 0 dense, which are ``enable``'s defaults.

    Returns a ``Fidelity`` (PSNR, SSIM, per frame and overall, LPIPS or why
    not, the attention error per layer and step, the report). Identical
    videos give an infinite PSNR, not an error. tilesplash must not already
    be enabled on ``pipe``: the dense run is diffusers' own attention, and
    tilesplash is removed again after the sparse run, whatever happens.
    """
    import torch

    from . import enable, handle_of

    if not isinstance(call, dict):
        raise TypeError(f"{_WHO}: call: expected a dict of the pipeline's arguments, got {type(call).__name__}")
    own = [name for name in _OWN_ARGUMENTS if name in call]
    if own:
        raise ValueError(f"{_WHO}: call: must not hold {own}: fidelity sets the generator from seed= "
                         "and output_type='np' for both runs")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"{_WHO}: seed: expected an int, got {seed!r}")
    if lpips not in (None, True, False):
        raise TypeError(f"{_WHO}: lpips: expected None, True or False, got {lpips!r}")
    if not callable(pipe):
        raise TypeError(f"{_WHO}: pipe: expected a diffusers pipeline, got {type(pipe).__name__}")
    if handle_of(pipe) is not None:
        raise ValueError(f"{_WHO}: pipe: tilesplash is already enabled on it; remove it first "
                         "(tilesplash.diffusers.remove(pipe)): the dense run must be diffusers' own attention")
    scorer, lpips_note = lpips_scorer(lpips)

    def run():
        generator = torch.Generator("cpu").manual_seed(seed)
        return pipe(**call, generator=generator, output_type="np").frames

    dense = run()
    handle = enable(pipe, **enable_options)
    try:
        sparse = run()
        report = handle.report()
    finally:
        handle.remove()
    whole, ssim, frames, lpips_mean = compare_videos(sparse, dense, scorer)
    return Fidelity(psnr=whole, ssim=ssim, frames=frames, lpips=lpips_mean, lpips_note=lpips_note,
                    attention=attention_rows(report), report=report)


def plot_fidelity(result: Fidelity, path) -> dict:
    """A picture of a ``fidelity`` result: PSNR and SSIM per frame (an infinite
    PSNR drawn at the top of the axis and labelled), and the attention error
    per layer (rows) and step (columns). Writes a PNG to ``path``; needs
    matplotlib. Returns {"path", "frames", "layers", "steps"}."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(f"{_WHO}: plot_fidelity needs matplotlib: pip install matplotlib "
                          "(or tilesplash[plot])") from None
    import numpy as np

    if not isinstance(result, Fidelity):
        raise TypeError(f"plot_fidelity: result: expected what fidelity() returns, got {type(result).__name__}")
    layers = list(dict.fromkeys((row["transformer"], row["layer"]) for row in result.attention))
    steps = sorted({row["step"] for row in result.attention})
    grid = np.full((max(1, len(layers)), max(1, len(steps))), np.nan)
    for row in result.attention:
        grid[layers.index((row["transformer"], row["layer"])), steps.index(row["step"])] = row["error"]

    figure = Figure(figsize=(12, 3.6), dpi=80)
    FigureCanvasAgg(figure)
    left, middle, right = figure.subplots(1, 3)
    values = [frame["psnr"] for frame in result.frames]
    finite = [v for v in values if not math.isinf(v)]
    top = (max(finite) if finite else 0.0) + 5.0
    left.plot(range(len(values)), [top if math.isinf(v) else v for v in values], marker="o")
    left.set_title(f"PSNR against dense: {result.psnr:.2f} dB" if not math.isinf(result.psnr)
                   else "PSNR against dense: identical (inf)", fontsize=9)
    left.set_xlabel("frame")
    left.set_ylabel("dB (inf drawn at the top)" if len(finite) < len(values) else "dB")
    middle.plot(range(len(values)), [frame["ssim"] for frame in result.frames], marker="o", color="#228833")
    middle.set_title(f"SSIM against dense: {result.ssim:.4f}", fontsize=9)
    middle.set_xlabel("frame")
    image = right.imshow(grid, aspect="auto", cmap="magma", interpolation="nearest")
    figure.colorbar(image, ax=right, label="sampled attention error")
    right.set_title("attention error (mean over heads)", fontsize=9)
    right.set_xlabel("step")
    right.set_ylabel("layer")
    right.set_xticks(range(len(steps)), labels=[str(s) for s in steps])
    several = len({t for t, _ in layers}) > 1
    right.set_yticks(range(len(layers)), labels=[f"{t}:{i}" if several else str(i) for t, i in layers])
    figure.tight_layout()
    figure.savefig(path, format="png")
    return {"path": path, "frames": len(values), "layers": len(layers), "steps": len(steps)}
