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
    lines = [json.loads(line) for line in printed.getvalue().splitlines()]
    # One line per part as it ends (with the kernel options so far), the whole last.
    assert [line["part"] for line in lines[:-1]] == ["band", "a", "b", "c", "t", "g"]
    assert all(isinstance(line["kernel_options"], list) for line in lines[:-1])
    result = lines[-1]
    assert all(line["result"] == result[line["part"]] for line in lines[:-1])
    assert result["tiny"] and result["pytest_gpu"] == "dry run"
    for name in ("480p", "720p"):
        a, b = result["a"][name], result["b"][name]
        assert "error" not in a and "error" not in b, (a, b)
        assert a["sdpa_ms"] > 0 and a["tilesplash_ms"] > 0 and sum(a["choices"].values()) == a[
            "heads"]
        assert b["same_block_lists"] is True and b["from_plans_ms"] > 0
    band = result["band"]
    assert "error" not in band, band
    assert band["dense_ms"] > 0 and band["tilesplash_ms"] > 0 and 0.2 < band["density"] < 0.3
    for name in ("480p", "720p"):
        c = result["c"][name]
        assert "error" not in c, c
        assert c["remove_restores_bits"] is True and c["enable_ms"] > 0 and c["steps"] == 10
        assert c["compiles_in_steps"] >= 0 and len(c["later_step_ms"]) == 9
    t = result["t"]
    assert "error" not in t, t
    assert t["band_tile"]["partial_blocks"] == 0 and t["band_tile"]["tilesplash_ms"] > 0
    assert t["tile"]["density"] >= t["token"]["density"] > 0
    assert t["token"]["tilesplash_ms"] > 0 and t["tile"]["tilesplash_ms"] > 0
    # The tile layer's BlockMasks: full blocks only but for a token-major sink segment.
    assert sum(p > 0 for p in t["tile"]["partial_blocks"]) <= 1
    # Grad mode: on CPU tensors the flex backward is refused naming the backend; the
    # comparison against dense autograd, which the GPU runs, is exact on itself.
    g = result["g"]
    assert "error" not in g, g
    assert g["backward"].startswith("refused as expected") and "flex" in g["backward"], g
    assert all(error == 0.0 for error in g["harness"].values()) and len(g["harness"]) == 4
    assert isinstance(result["kernel_options"], list)


def test_gpu_prepare_survives_a_chatty_compiler_under_pipefail(tmp_path):
    """The H200 run: `c++ -E -H` printed so much that `grep -m1` closed the pipe and
    the script died with status 141 and no message. A fake compiler prints 200,000
    include lines (the header among the first), a fake Python stands in for pip."""
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "gpu_prepare.sh").write_text((BENCH / "gpu_prepare.sh").read_text())
    fake = tmp_path / "bin"
    fake.mkdir()
    headers = subprocess.run(["bash", "-c", "echo '#include <nlohmann/json.hpp>' | "
                              "c++ -x c++ -E -H - 2>&1 >/dev/null"], capture_output=True,
                             text=True).stdout
    real = next((line.split()[1] for line in headers.splitlines()
                 if line.rstrip().endswith("nlohmann/json.hpp")), None)
    if real is None:
        pytest.skip("nlohmann-json's headers are not installed here")
    (fake / "c++").write_text(f"""#!/bin/bash
cat >/dev/null
echo ". {real}" >&2
for i in $(seq 200000); do echo ".. /usr/include/c++/12/bits/header_$i.h" >&2; done
""")
    (fake / "python").write_text("""#!/bin/bash
while [ $# -gt 0 ]; do if [ "$1" = -d ]; then mkdir -p "$2"; touch "$2/x-1-py3-none-any.whl"; fi; shift; done
""")
    for script in fake.iterdir():
        script.chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "PYTHON": str(fake / "python")}
    done = subprocess.run(["bash", str(tmp_path / "bench" / "gpu_prepare.sh")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / ".gpu" / "prefix" / "include" / "nlohmann" / "json.hpp").exists()
    assert "gpu_prepare: .gpu is ready" in done.stdout


def test_gpu_prepare_fails_loudly(tmp_path):
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench" / "gpu_prepare.sh").write_text((BENCH / "gpu_prepare.sh").read_text())
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "c++").write_text("#!/bin/bash\ncat >/dev/null\necho 'fatal error: no such file' >&2\n"
                              "exit 1\n")
    (fake / "c++").chmod(0o755)
    done = subprocess.run(["bash", str(tmp_path / "bench" / "gpu_prepare.sh")],
                          env={"PATH": f"{fake}:/usr/bin:/bin"}, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and "nlohmann/json.hpp not found" in done.stderr


def test_gpu_check_script_parses():
    subprocess.run(["bash", "-n", str(BENCH / "gpu_check.sh")], check=True)
    subprocess.run(["bash", "-n", str(BENCH / "gpu_prepare.sh")], check=True)
