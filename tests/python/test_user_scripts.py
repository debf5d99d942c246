"""Every script the README and docs point users at runs, in a tiny mode, as its own process
(issue 37: bench/flex_strategies.py broke unnoticed). The scripts with tests of their own
(error_target, compensation, wan_block, gpu_check, flex_strategies, ulysses, peers and the
examples wan_pipeline and fidelity) are covered there; this file covers the rest.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
if not (ROOT / "bench").is_dir():
    pytest.skip("bench/ and examples/ are not beside the tests (an installed copy)", allow_module_level=True)

import tilesplash  # noqa: E402


def _run(arguments, timeout=600, needs=()):
    for module in needs:
        pytest.importorskip(module)
    env = dict(os.environ)
    # The package under test, wherever the suite found it (the build tree or an install).
    package_root = str(pathlib.Path(tilesplash.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([package_root, env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, *arguments], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=timeout)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-4000:]
    return result.stdout


def test_spec_parse():
    out = _run(["bench/spec_parse.py", "--rounds", "1", "--max-terms", "512"])
    assert "bracketed" in out or "parser" in out


def test_spec_parse_refuses_too_few_terms():
    result = subprocess.run([sys.executable, "bench/spec_parse.py", "--max-terms", "64"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "--max-terms must be >= 512" in result.stderr


def test_flex_plans():
    out = _run(["bench/flex_plans.py", "--heads", "2", "--geometry", "3x4x4", "--block", "16"],
               needs=("torch",))
    assert '"same_block_lists": true' in out


def test_splash_plans():
    out = _run(["bench/splash_plans.py", "--cases", "band-8192", "--reps", "1", "--timeout", "300"],
               needs=("jax",))
    assert "| yes |" in out


def test_tile_granularity():
    cli = os.environ.get("TILESPLASH_CLI")
    if not cli:
        pytest.skip("TILESPLASH_CLI is not set (ctest sets it to the built CLI)")
    out = _run(["bench/tile_granularity.py", "--geometry", "frames=3,height=8,width=8", "--heads", "2",
                "--block-q", "64", "--block-kv", "64", "--cli", cli])
    assert "tile" in out and "token" in out


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_wan_sequence_parallel_example():
    pytest.importorskip("diffusers")
    out = _run(["-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-addr", "127.0.0.1",
                "--master-port", str(_free_port()),
                "examples/wan_sequence_parallel.py", "--steps", "1", "--frames", "2"], needs=("torch",))
    assert "the same choice for every head of every call: True" in out
