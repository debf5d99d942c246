"""How close a sparse run of a pipeline is to its dense run, measured as the field reports it.

Sparse video attention papers (Sparse VideoGen, Radial, SpargeAttn, SCOPE,
Sol-Attn) report PSNR, SSIM and LPIPS of the sparse video against the dense
video made from the same seed, not against a reference data set: what a
user needs to know is how much the speed-up changed *their* video.
``fidelity`` runs a pipeline dense, then with tilesplash enabled, from the
same seed, and compares the decoded frames; it also folds the handle's
report into the per-layer, per-step attention error the router measured
(the sampled relative error of each head's mask against dense).

Frames are compared as a pipeline returns them with ``output_type="np"``:
floats in [0, 1], shape [batch, frames, height, width, channels] (or
without the batch axis). PSNR uses a peak of 1; SSIM is Wang et al.'s
(Gaussian window of 11 with sigma 1.5, K1 = 0.01, K2 = 0.03, the valid
region, per channel then averaged), the setting of scikit-image's
``structural_similarity(gaussian_weights=True, use_sample_covariance=False)``.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field

import numpy as np

SSIM_WINDOW = 11
SSIM_SIGMA = 1.5
SSIM_K1, SSIM_K2 = 0.01, 0.03
# torchvision's AlexNet weights, which the lpips package's default network
# loads through torch.hub: LPIPS is computed only when they are already in
# torch's hub cache, never downloaded here.
_LPIPS_BACKBONE = "alexnet-owt-7be5be79.pth"


@dataclass
class Fidelity:
    """What ``fidelity`` returns (``as_dict()`` for JSON).

    psnr: PSNR (dB) of the whole sparse video against the dense one (its mean
        squared error over every frame); ``math.inf`` when they are identical.
    ssim: SSIM averaged over frames (1.0 when identical).
    frames: per frame (batch entries one after another): {"psnr", "ssim"} and
        "lpips" when computed.
    lpips: LPIPS averaged over frames, or None with ``lpips_note`` saying why.
    attention: one row per (transformer, layer, step) of the sparse run's
        report: "error" (mean over heads of the sampled relative error of
        the mask each head ran; 0 for heads run dense), "density" (mean
        over heads), "heads".
    report: the sparse run's whole report (``handle.report()``).
    """

    psnr: float
    ssim: float
    frames: list[dict]
    lpips: float | None
    lpips_note: str | None
    attention: list[dict]
    report: list[dict] = field(repr=False)

    def as_dict(self) -> dict:
        """Everything but the report, with infinite PSNRs as the string "inf" (JSON has no inf)."""
        out = asdict(self)
        del out["report"]
        out["psnr"] = _json_float(out["psnr"])
        for frame in out["frames"]:
            frame["psnr"] = _json_float(frame["psnr"])
        return out


def _json_float(value: float):
    return "inf" if math.isinf(value) else value


def video_frames(video, who: str = "video") -> np.ndarray:
    """A pipeline's frames as float64 [frames, height, width, channels] (batch folded in)."""
    if hasattr(video, "detach"):
        video = video.detach().float().cpu().numpy()
    array = np.asarray(video, dtype=np.float64)
    if array.ndim == 5:
        array = array.reshape(-1, *array.shape[2:])
    if array.ndim != 4:
        raise ValueError(f"{who}: expected frames [batch, frames, height, width, channels] or "
                         f"[frames, height, width, channels] (output_type='np'), got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{who}: has NaN or infinite values")
    return array


def psnr(mse: float) -> float:
    """PSNR in dB for frames in [0, 1]; infinite for identical frames."""
    return math.inf if mse == 0.0 else 10.0 * math.log10(1.0 / mse)


def _gaussian(size: int) -> np.ndarray:
    x = np.arange(size, dtype=np.float64) - (size - 1) / 2.0
    w = np.exp(-(x * x) / (2.0 * SSIM_SIGMA ** 2))
    return w / w.sum()


def _filter_valid(image: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Separable filter of [H, W, C] over H and W, valid region only."""
    size = len(weights)
    rows = image.shape[0] - size + 1
    cols = image.shape[1] - size + 1
    out = sum(weights[k] * image[k:k + rows] for k in range(size))
    return sum(weights[k] * out[:, k:k + cols] for k in range(size))


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """SSIM of two frames [H, W, C] in [0, 1] (the module's docstring gives the setting).
    Frames smaller than the window use the largest odd window that fits."""
    size = min(SSIM_WINDOW, a.shape[0] - (1 - a.shape[0] % 2), a.shape[1] - (1 - a.shape[1] % 2))
    weights = _gaussian(size)
    mu_a, mu_b = _filter_valid(a, weights), _filter_valid(b, weights)
    var_a = _filter_valid(a * a, weights) - mu_a * mu_a
    var_b = _filter_valid(b * b, weights) - mu_b * mu_b
    cov = _filter_valid(a * b, weights) - mu_a * mu_b
    c1, c2 = SSIM_K1 ** 2, SSIM_K2 ** 2
    value = ((2 * mu_a * mu_b + c1) * (2 * cov + c2)) / ((mu_a ** 2 + mu_b ** 2 + c1) * (var_a + var_b + c2))
    return float(value.mean())


def compare_videos(sparse, dense, lpips_model=None) -> tuple[float, float, list[dict], float | None]:
    """(psnr, ssim, per-frame rows, lpips or None) of ``sparse`` against ``dense``."""
    a, b = video_frames(sparse, "sparse video"), video_frames(dense, "dense video")
    if a.shape != b.shape:
        raise ValueError(f"sparse video: shape {a.shape} differs from the dense video's {b.shape}")
    rows = []
    for frame_a, frame_b in zip(a, b):
        rows.append({"psnr": psnr(float(np.mean((frame_a - frame_b) ** 2))), "ssim": ssim(frame_a, frame_b)})
    lpips_mean = None
    if lpips_model is not None:
        for row, value in zip(rows, lpips_model(a, b)):
            row["lpips"] = value
        lpips_mean = float(np.mean([row["lpips"] for row in rows]))
    whole = psnr(float(np.mean((a - b) ** 2)))
    return whole, float(np.mean([row["ssim"] for row in rows])), rows, lpips_mean


def attention_rows(report: list[dict]) -> list[dict]:
    """The report folded per (transformer, layer, step): mean sampled error and density over heads."""
    groups: dict[tuple, dict] = {}
    for record in report:
        key = (record.get("transformer", ""), record.get("layer", 0), record["step"])
        row = groups.setdefault(key, {"transformer": key[0], "layer": key[1], "step": key[2],
                                      "error": 0.0, "density": 0.0, "heads": 0})
        for head in record["heads"]:
            error = head.get("error")
            row["error"] += 0.0 if error is None or head["choice"] == "dense" else float(error)
            row["density"] += head["density"]
            row["heads"] += 1
    rows = []
    for key in sorted(groups, key=lambda k: (str(k[0]), k[1], k[2])):
        row = groups[key]
        if row["heads"]:
            row["error"] /= row["heads"]
            row["density"] /= row["heads"]
        rows.append(row)
    return rows


def lpips_scorer(wanted: bool | None):
    """(a function frames, frames -> per-frame LPIPS, None) or (None, why not).

    wanted None: LPIPS when the lpips package and its backbone's weights are
    installed; True: required (raises ImportError naming what is missing);
    False: not computed."""
    if wanted is False:
        return None, "not asked for (lpips=False)"
    try:
        import lpips  # noqa: F401
        import torch
    except ImportError:
        why = "the lpips package is not installed (pip install lpips)"
    else:
        weights = os.path.join(torch.hub.get_dir(), "checkpoints", _LPIPS_BACKBONE)
        if os.path.exists(weights):
            return _lpips_function(), None
        why = f"LPIPS's AlexNet weights are not in torch's hub cache ({weights}); nothing is downloaded"
    if wanted:
        raise ImportError(f"tilesplash.diffusers.fidelity: lpips=True but {why}")
    return None, why


def _lpips_function():  # pragma: no cover - needs the lpips weights, absent in CI
    import lpips
    import torch

    model = lpips.LPIPS(net="alex", verbose=False).eval()

    def score(a: np.ndarray, b: np.ndarray) -> list[float]:
        with torch.no_grad():
            x = torch.from_numpy(a).permute(0, 3, 1, 2).float() * 2 - 1
            y = torch.from_numpy(b).permute(0, 3, 1, 2).float() * 2 - 1
            return [float(v) for v in model(x, y).flatten()]

    return score
