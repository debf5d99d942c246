"""tilesplash.diffusers.fidelity: a pipeline dense and sparse from one seed, PSNR / SSIM of the
frames against dense, the report's attention error per layer and step (issue 35, part 4).

The metrics against plain float64 references written here (SSIM window by window), and whole
tiny offline pipelines: Wan 2.1 and HunyuanVideo, decoded to frames.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
tsd = pytest.importorskip("tilesplash.diffusers")

from tilesplash.diffusers import _fidelity as metrics  # noqa: E402



def _ssim_reference(a, b, size=11, sigma=1.5):
    """SSIM straight from Wang et al.: every valid window's Gaussian-weighted statistics."""
    x = np.arange(size) - (size - 1) / 2
    w1 = np.exp(-x * x / (2 * sigma * sigma))
    w = np.outer(w1, w1) / np.outer(w1, w1).sum()
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    values = []
    for c in range(a.shape[2]):
        for i in range(a.shape[0] - size + 1):
            for j in range(a.shape[1] - size + 1):
                pa, pb = a[i:i + size, j:j + size, c], b[i:i + size, j:j + size, c]
                ma, mb = (w * pa).sum(), (w * pb).sum()
                va, vb = (w * pa * pa).sum() - ma * ma, (w * pb * pb).sum() - mb * mb
                cov = (w * pa * pb).sum() - ma * mb
                values.append((2 * ma * mb + c1) * (2 * cov + c2) / ((ma * ma + mb * mb + c1) * (va + vb + c2)))
    return float(np.mean(values))


@pytest.mark.parametrize("shape", [(16, 16, 3), (13, 20, 1), (11, 11, 2)])
def test_ssim_matches_the_windowed_reference(shape):
    rng = np.random.default_rng(sum(shape))
    a = rng.random(shape)
    b = np.clip(a + 0.1 * rng.standard_normal(shape), 0, 1)
    assert metrics.ssim(a, b) == pytest.approx(_ssim_reference(a, b), abs=1e-12)
    assert metrics.ssim(a, a) == pytest.approx(1.0, abs=1e-12)
    assert metrics.ssim(a, b) < 0.99


def test_ssim_of_frames_smaller_than_the_window_uses_the_largest_odd_window():
    rng = np.random.default_rng(3)
    a, b = rng.random((8, 9, 1)), rng.random((8, 9, 1))
    assert metrics.ssim(a, b) == pytest.approx(_ssim_reference(a, b, size=7), abs=1e-12)


def test_psnr_and_the_comparison():
    rng = np.random.default_rng(0)
    dense = rng.random((1, 3, 8, 8, 3))
    assert metrics.psnr(0.0) == math.inf
    assert metrics.psnr(0.01) == pytest.approx(20.0)
    whole, ssim, frames, lpips = metrics.compare_videos(dense.copy(), dense)
    assert whole == math.inf and ssim == pytest.approx(1.0) and lpips is None
    assert [f["psnr"] for f in frames] == [math.inf] * 3
    noisy = dense.copy()
    noisy[0, 1] += 0.01  # one frame off by 0.01 everywhere: that frame 40 dB, the video 44.77 dB
    whole, _, frames, _ = metrics.compare_videos(noisy, dense)
    assert frames[1]["psnr"] == pytest.approx(40.0)
    assert frames[0]["psnr"] == math.inf and frames[2]["psnr"] == math.inf
    assert whole == pytest.approx(10 * math.log10(3 / 1e-4))


def test_bad_videos_are_refused_by_name():
    with pytest.raises(ValueError, match="sparse video: expected frames"):
        metrics.compare_videos(np.zeros((4, 4)), np.zeros((4, 4)))
    with pytest.raises(ValueError, match="differs from the dense video"):
        metrics.compare_videos(np.zeros((2, 8, 8, 3)), np.zeros((3, 8, 8, 3)))
    bad = np.zeros((2, 8, 8, 3))
    bad[0, 0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="dense video: has NaN"):
        metrics.compare_videos(np.zeros((2, 8, 8, 3)), bad)


def test_attention_rows_fold_the_report():
    report = [
        {"transformer": "t", "layer": 1, "step": 0,
         "heads": [{"choice": "spatial", "error": 0.2, "density": 0.25},
                   {"choice": "temporal", "error": 0.4, "density": 0.35}]},
        {"transformer": "t", "layer": 1, "step": 0,  # a second CFG call of the same layer and step
         "heads": [{"choice": "dense", "density": 1.0}, {"choice": "spatial", "error": 0.2, "density": 0.4}]},
        {"transformer": "t", "layer": 0, "step": 0, "heads": [{"choice": "dense", "density": 1.0}]},
    ]
    rows = metrics.attention_rows(report)
    assert [(r["layer"], r["step"], r["heads"]) for r in rows] == [(0, 0, 1), (1, 0, 4)]
    assert rows[0]["error"] == 0.0 and rows[0]["density"] == 1.0
    assert rows[1]["error"] == pytest.approx(0.2) and rows[1]["density"] == pytest.approx(0.5)


def test_lpips_is_optional_and_never_downloaded():
    scorer, note = metrics.lpips_scorer(False)
    assert scorer is None and "lpips=False" in note
    try:
        import lpips  # noqa: F401
    except ImportError:
        scorer, note = metrics.lpips_scorer(None)
        assert scorer is None and "pip install lpips" in note
        with pytest.raises(ImportError, match="lpips=True"):
            metrics.lpips_scorer(True)


def _example():
    """examples/fidelity.py, whose tiny offline pipelines the tests run too."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "fidelity.py"
    if not path.exists():
        pytest.skip("examples/ is not beside the tests (an installed copy)")
    spec = importlib.util.spec_from_file_location("fidelity_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tiny(model):
    pipe, call = _example().MODELS[model]()
    pipe.set_progress_bar_config(disable=True)
    call.update(height=64, width=64, num_frames=9, num_inference_steps=4)
    return pipe, call


def _wan_pipeline():
    return _tiny("wan")


def _hunyuan_pipeline():
    return _tiny("hunyuan")


@pytest.mark.parametrize("build", [_wan_pipeline, _hunyuan_pipeline], ids=["wan", "hunyuan"])
def test_fidelity_end_to_end(build, tmp_path):
    pipe, call = build()
    originals = [module.processor for module in pipe.transformer.modules() if hasattr(module, "processor")]
    result = tsd.fidelity(pipe, call, seed=3, density=0.3, samples=8, dense_steps=1, dense_layers=1)
    # tilesplash is off again, the processors are diffusers' own.
    assert tsd.handle_of(pipe) is None
    assert [m.processor for m in pipe.transformer.modules() if hasattr(m, "processor")] == originals
    assert len(result.frames) == 9 and 0 < result.psnr < math.inf and 0 < result.ssim < 1
    assert result.lpips is None and result.lpips_note
    # Per layer and step, from the report: layer 0 and step 0 dense (error 0), the others routed.
    layers = {row["layer"] for row in result.attention}
    steps = {row["step"] for row in result.attention}
    assert len(layers) >= 2 and layers == set(range(len(layers))) and steps == {0, 1, 2, 3}
    for row in result.attention:
        if row["layer"] == 0 or row["step"] == 0:
            assert row["error"] == 0.0 and row["density"] == 1.0
        else:
            assert row["error"] > 0 and row["density"] < 1
    json.dumps(result.as_dict())
    picture = tsd.plot_fidelity(result, tmp_path / "fidelity.png")
    assert (tmp_path / "fidelity.png").stat().st_size > 0 and picture["steps"] == 4


def test_identical_runs_report_infinite_psnr(monkeypatch):
    # Two runs of diffusers' own attention from one seed (enable replaced by a handle that
    # switches nothing): the same frames, an infinite PSNR and not an error.
    class Untouched:
        def report(self):
            return []

        def remove(self):
            pass

    monkeypatch.setattr(tsd, "enable", lambda pipe, **options: Untouched())
    pipe, call = _wan_pipeline()
    result = tsd.fidelity(pipe, call)
    assert result.psnr == math.inf and result.ssim == pytest.approx(1.0)
    assert all(frame["psnr"] == math.inf for frame in result.frames)
    assert json.loads(json.dumps(result.as_dict()))["psnr"] == "inf"
    assert result.attention == []


def test_fidelity_refuses_bad_calls_before_running():
    pipe, call = _wan_pipeline()
    with pytest.raises(ValueError, match=r"fidelity: call: must not hold \['generator'\]"):
        tsd.fidelity(pipe, dict(call, generator=torch.Generator()))
    with pytest.raises(TypeError, match="fidelity: call: expected a dict"):
        tsd.fidelity(pipe, [call])
    with pytest.raises(TypeError, match="fidelity: seed"):
        tsd.fidelity(pipe, call, seed=1.5)
    handle = tsd.enable(pipe)
    try:
        with pytest.raises(ValueError, match="already enabled"):
            tsd.fidelity(pipe, call)
    finally:
        handle.remove()


def test_the_fidelity_example_runs_tiny(tmp_path, capsys):
    example = _example()
    result = example.main(["--model", "hunyuan", "--steps", "3", "--frames", "9", "--size", "64",
                           "--plot", str(tmp_path / "f.png"), "--json", str(tmp_path / "f.json")])
    assert 0 < result.psnr < math.inf
    assert json.loads((tmp_path / "f.json").read_text())["frames"][0]["ssim"] == result.frames[0]["ssim"]
    assert "video: PSNR" in capsys.readouterr().out
    with pytest.raises(SystemExit):  # one file for both outputs is refused before any work
        example.main(["--plot", str(tmp_path / "x"), "--json", str(tmp_path / "x")])
