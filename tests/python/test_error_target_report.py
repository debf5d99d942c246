"""The picture and the summary of an error-target run: tilesplash.diffusers.plot
(read back: size, not blank, one row of panels per requested step),
summarize()'s mean density and time saved, and the CLI's `route --error --png`."""

from __future__ import annotations

import json
import os
import subprocess

import numpy as np
import pytest

pytest.importorskip("torch")
from tilesplash.diffusers import plot, summarize  # noqa: E402


def _report(steps=2, layers=3, heads=4):
    records = []
    for step in range(steps):
        for layer in range(layers):
            records.append({
                "transformer": "transformer", "layer": layer, "step": step, "seconds": 0.5,
                "heads": [{"head": h, "choice": ("spatial" if h % 2 else "temporal")
                           + f"@{0.05 * (1 + (h + layer) % 3):g}",
                           "family": "spatial" if h % 2 else "temporal",
                           "rung": 0.05 * (1 + (h + layer) % 3),
                           "routed": True, "density": 0.05 * (1 + (h + layer) % 3),
                           "error": 0.01 * (h + 1), "target_met": h != 3,
                           "tiles_visited": 0.25, "seconds": 0.1} for h in range(heads)]})
    return records


def test_summarize_gains_mean_density_time_saved_and_missed_targets():
    rows = summarize(_report())
    assert [r["step"] for r in rows] == [0, 1]
    row = rows[0]
    assert row["density"] == pytest.approx(np.mean([0.05 * (1 + (h + l) % 3)
                                                    for l in range(3) for h in range(4)]))
    # 12 heads of 0.1 s at a quarter of the map: dense would take 0.4 s each.
    assert row["dense_seconds"] == pytest.approx(12 * 0.4)
    assert row["saved_seconds"] == pytest.approx(12 * 0.3)
    assert row["target_missed"] == 3


def test_summarize_groups_density_and_time_saved_by_family():
    report = _report()
    row = summarize(report)[0]
    families = row["families"]
    assert sorted(families) == ["spatial", "temporal"]
    for name in families:
        heads = [h for r in report if r["step"] == 0 for h in r["heads"]
                 if h["choice"].startswith(name + "@")]
        assert families[name]["heads"] == len(heads) == 6
        assert families[name]["density"] == pytest.approx(np.mean([h["density"] for h in heads]))
        assert families[name]["seconds"] == pytest.approx(0.1 * len(heads))
        assert families[name]["saved_seconds"] == pytest.approx(0.3 * len(heads))
    # The families add up to the row, and a parameterised choice is its family.
    assert sum(f["heads"] for f in families.values()) == 12
    assert sum(f["saved_seconds"] for f in families.values()) == pytest.approx(row["saved_seconds"])
    report[0]["heads"][0].update(choice="sta:3x3x3", family="sta", rung=0.0)
    assert summarize(report)[0]["families"]["sta"]["heads"] == 1


def test_plot_writes_one_row_of_panels_per_step(tmp_path):
    image = pytest.importorskip("matplotlib.image")
    one = plot(_report(), tmp_path / "mean.png")
    two = plot(_report(), tmp_path / "steps.png", steps=[0, 1])
    assert one["panels"] == 3 and two["panels"] == 6
    a, b = image.imread(tmp_path / "mean.png"), image.imread(tmp_path / "steps.png")
    assert a.shape[1] == b.shape[1] == 13 * 80
    assert a.shape[0] == round((0.6 + 3.2) * 80) and b.shape[0] == round((0.6 + 6.4) * 80)
    for picture in (a, b):
        assert picture[..., :3].std() > 0.05  # not blank
    with pytest.raises(ValueError, match="steps"):
        plot(_report(), tmp_path / "x.png", steps=[7])
    with pytest.raises(ValueError, match="report"):
        plot([], tmp_path / "x.png")


def test_cli_route_error_writes_the_head_picture(tmp_path):
    cli = os.environ.get("TILESPLASH_CLI")
    if not cli:
        pytest.skip("TILESPLASH_CLI not set (ctest sets it)")
    image = pytest.importorskip("matplotlib.image")
    path = tmp_path / "heads.png"
    out = subprocess.run([cli, "route", "--geometry", "frames=6,height=8,width=8", "--head-dim",
                          "32", "--heads", "6", "--bands", "--error", "0.1", "--png", str(path),
                          "--json"], check=True, capture_output=True, text=True).stdout
    record = json.loads(out)
    assert record["error_target"] == 0.1 and record["png"] == str(path)
    assert 0 < record["mean_density"] < 1
    assert all("@" in h["choice"] and "target_met" in h for h in record["heads"])
    picture = image.imread(path)
    assert picture.shape[:2] == (3 * 24 + 2 * 6, 6 * 24)
    assert picture[..., :3].std() > 0.05
    bad = subprocess.run([cli, "route", "--geometry", "frames=6,height=8,width=8", "--error",
                          "-1"], capture_output=True, text=True)
    assert bad.returncode != 0 and "--error" in bad.stderr
    bad = subprocess.run([cli, "route", "--geometry", "frames=6,height=8,width=8", "--error",
                          "0.1", "--densities", "0.3,0.2"], capture_output=True, text=True)
    assert bad.returncode != 0 and "--densities" in bad.stderr


def test_enable_with_an_error_target_end_to_end(tmp_path):
    pytest.importorskip("diffusers")
    import tilesplash.diffusers as tsd
    from diffusers_tiny import run_wan, tiny_wan, wan_inputs

    model = tiny_wan()
    hidden, text = wan_inputs()
    handle = tsd.enable(model, error=0.3, densities=[0.1, 0.3, 0.6], dense_layers=0,
                        total_steps=4, dense_steps=0)
    try:
        run_wan(model, hidden, text)
        report = handle.report()
    finally:
        handle.remove()
    heads = [h for r in report for h in r["heads"]]
    assert heads and all(h["routed"] and "@" in h["choice"] and "target_met" in h for h in heads)
    assert summarize(report)[0]["density"] < 1.0
    if pytest.importorskip("matplotlib"):
        assert plot(report, tmp_path / "wan.png")["panels"] == 3
    with pytest.raises(ValueError, match="error"):
        tsd.enable(model, error=0.0)
    with pytest.raises(ValueError, match="densities"):
        tsd.enable(model, error=0.1, densities=[0.5, 0.2])


def test_plot_rows_are_named_by_layer():
    from tilesplash.diffusers._report import _layer_labels

    assert _layer_labels([("WanTransformer3DModel", 1), ("WanTransformer3DModel", 2)]) == ["1", "2"]
    assert _layer_labels([("transformer", 0), ("transformer_2", 0)]) == [
        "transformer:0", "transformer_2:0"]
