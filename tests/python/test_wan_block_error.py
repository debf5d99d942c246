"""bench/wan_block.py --error at a tiny size: the Wan block runs an error target end to
end through tilesplash.diffusers.enable, writes its report and its picture, and reports
its self-attention error against native next to --density's."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("diffusers")
image = pytest.importorskip("matplotlib.image")

from conftest import import_bench  # noqa: E402


@pytest.fixture(scope="module")
def wan_block():
    return import_bench("wan_block")


def test_error_target_end_to_end(wan_block, tmp_path, capsys):
    report_path, plot_path = tmp_path / "report.json", tmp_path / "heads.png"
    s = wan_block.main(["--frames", "3", "--height", "8", "--width", "8", "--threads", "1",
                        "--error", "0.3", "--report", str(report_path), "--plot", str(plot_path)])
    e = s["error_target"]
    heads = s["heads"]
    assert len(e["choices"]) == heads and all("@" in c for c in e["choices"])  # ladder rungs
    assert 0.0 < e["mean_density"] <= 1.0
    # The errors against native: finite, and the density run's beside it.
    assert 0.0 <= e["self_attention_error"] < 2.0 and 0.0 <= s["self_attention_error"] < 2.0
    report = json.loads(report_path.read_text())
    assert report and all(len(r["heads"]) == heads for r in report)
    assert {h["choice"] for r in report for h in r["heads"]} == set(e["choices"])
    picture = image.imread(plot_path)
    assert picture.shape[0] > 100 and picture[..., :3].std() > 0.05
    assert e["summary"][0]["families"]
    out = capsys.readouterr().out
    assert "error target 0.3: self-attention relative L2 error against native" in out
    assert "(density 0.25: " in out


def test_relative_l2_is_the_norm_ratio(wan_block):
    import torch

    native = torch.tensor([3.0, 4.0])
    assert wan_block.relative_l2(torch.tensor([3.0, 4.0]), native) == 0.0
    assert wan_block.relative_l2(torch.tensor([3.0, 5.0]), native) == pytest.approx(0.2)


def test_error_flags_are_checked(wan_block):
    for argv in (["--error", "0"], ["--error", "nan"], ["--error", "-1"], ["--report", "x.json"],
                 ["--error", "0.1", "--mode", "native"]):
        with pytest.raises(SystemExit):
            wan_block.parse_args(argv)
