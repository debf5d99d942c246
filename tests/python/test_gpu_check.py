"""bench/gpu_check.py's dry run (--device cpu --tiny): every part of the GPU check on
tiny shapes on the CPU, so that the script that only a GPU machine runs for real
is exercised in CI; and bench/gpu_check.sh parses."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import pathlib
import subprocess

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"
if not (BENCH / "gpu_check.py").exists():
    pytest.skip("bench/ is not beside the tests (an installed copy)", allow_module_level=True)


def test_gpu_check_dry_run_covers_every_part():
    spec = importlib.util.spec_from_file_location("gpu_check", BENCH / "gpu_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert module.main(["--device", "cpu", "--tiny", "--repeats", "1",
                            "--pytest-summary", "dry run"]) == 0
    result = json.loads(printed.getvalue())
    assert result["tiny"] and result["pytest_gpu"] == "dry run"
    for name in ("480p", "720p"):
        a, b = result["a"][name], result["b"][name]
        assert "error" not in a and "error" not in b, (a, b)
        assert a["sdpa_ms"] > 0 and a["tilesplash_ms"] > 0 and sum(a["choices"].values()) == a[
            "heads"]
        assert b["same_block_lists"] is True and b["from_plans_ms"] > 0
    c = result["c"]
    assert "error" not in c, c
    assert c["remove_restores_bits"] is True and c["enable_ms"] > 0


def test_gpu_check_script_parses():
    subprocess.run(["bash", "-n", str(BENCH / "gpu_check.sh")], check=True)
    subprocess.run(["bash", "-n", str(BENCH / "gpu_prepare.sh")], check=True)
