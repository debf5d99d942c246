"""FlexAttention's kernel options as tuner candidates, cached per device name.

On a GPU the Triton template's tile (BLOCK_M x BLOCK_N, inside the plan's
sparse block), pipeline stages and warps decide its speed, and the best
choice depends on the GPU, the head dim, the dtype and how sparse the mask
is. tune() times every candidate on random data with the compiled kernel
and stores the fastest in a JSON cache keyed like the native tuner's keys
(tilesplash/tuning.h: backend, device, dtype, head dim, mask family,
density bucket, length buckets) plus the sparse block; attention calls read
it and never tune by themselves. On the CPU there is nothing to choose (the
C++ template takes no such options): the lookup answers None.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
import time
from pathlib import Path

import torch

FORMAT_VERSION = 1

CANDIDATES = (
    {"BLOCK_M": 128, "BLOCK_N": 64, "num_stages": 3, "num_warps": 8},
    {"BLOCK_M": 128, "BLOCK_N": 128, "num_stages": 2, "num_warps": 8},
    {"BLOCK_M": 128, "BLOCK_N": 64, "num_stages": 2, "num_warps": 4},
    {"BLOCK_M": 64, "BLOCK_N": 64, "num_stages": 3, "num_warps": 4},
    {"BLOCK_M": 64, "BLOCK_N": 128, "num_stages": 3, "num_warps": 4},
    {"BLOCK_M": 128, "BLOCK_N": 32, "num_stages": 4, "num_warps": 4},
)
"""Every kernel_options the tuner tries (tiles must divide the sparse block)."""

_loaded: dict[str, dict] = {}


def cache_path() -> Path:
    """$TILESPLASH_FLEX_TUNING, else $XDG_CACHE_HOME/tilesplash/flex_tuning.json, else
    ~/.cache/tilesplash/flex_tuning.json."""
    explicit = os.environ.get("TILESPLASH_FLEX_TUNING")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tilesplash" / "flex_tuning.json"


def device_name(device) -> str:
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return device.type


def density_bucket(density: float) -> float:
    """The native tuner's bucket: the nearest 0.01 below 0.05, else the nearest 0.05."""
    step = 0.01 if density < 0.05 else 0.05
    return round(round(density / step) * step, 2)


def tune_key(device, mask, q_len, kv_len, head_dim, dtype, block) -> str:
    from .tables import plan_tables

    tables = plan_tables(mask, q_len, kv_len, block[0], block[1])
    density = tables.kept_pairs / float(q_len * kv_len) if tables.kept_pairs >= 0 else 1.0
    fields = {
        "backend": "flex",
        "device": device_name(device),
        "torch": torch.__version__.split("+")[0],
        "dtype": str(dtype).removeprefix("torch."),
        "head_dim": int(head_dim),
        "mask_family": re.sub(r"-?\d+(\.\d+)?", "#", str(mask)),
        "density": density_bucket(density),
        "q_bucket": int(math.log2(q_len)),
        "kv_bucket": int(math.log2(kv_len)),
        "block": f"{block[0]}x{block[1]}",
    }
    return json.dumps(fields, sort_keys=True)


def _entries(path: Path) -> dict:
    key = str(path)
    if key not in _loaded:
        entries = {}
        try:
            data = json.loads(path.read_text())
            if data.get("version") == FORMAT_VERSION and isinstance(data.get("entries"), dict):
                entries = data["entries"]
        except (OSError, ValueError, AttributeError):
            entries = {}
        _loaded[key] = entries
    return _loaded[key]


_keys: dict = {}


def kernel_options_for(device, mask, q_len, kv_len, head_dim, dtype, block):
    """The cached kernel options for this call's shape on this device, else None
    (FlexAttention's own defaults). Always None on the CPU. The key of a shape
    is computed once per process; the file is read once per process."""
    if torch.device(device).type == "cpu":
        return None
    memo = (str(device), mask, q_len, kv_len, head_dim, dtype, tuple(block))
    key = _keys.get(memo)
    if key is None:
        key = _keys[memo] = tune_key(device, mask, q_len, kv_len, head_dim, dtype, block)
    entry = _entries(cache_path()).get(key)
    return None if entry is None else dict(entry["kernel_options"])


def store(key: str, kernel_options: dict, seconds: float, path: Path | None = None) -> None:
    path = cache_path() if path is None else path
    path.parent.mkdir(parents=True, exist_ok=True)
    _loaded.pop(str(path), None)
    entries = dict(_entries(path))
    entries[key] = {"kernel_options": kernel_options, "seconds": seconds}
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(handle, "w") as f:
        json.dump({"version": FORMAT_VERSION, "entries": entries}, f, indent=1, sort_keys=True)
    os.replace(temporary, path)
    _loaded[str(path)] = entries


def _synchronize(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def tune(mask, q_len, kv_len=None, *, heads=1, head_dim=128, dtype=torch.bfloat16, device="cuda",
         block_size=128, candidates=None, repeats=3, save=True) -> dict:
    """Times every candidate kernel_options on random data and (save=True) stores the fastest.

    Returns {"key", "best" (the options), "results": [{"kernel_options", "seconds" or
    "error"}]}. A candidate the compiler or the GPU refuses (shared memory) is
    reported with its error and skipped.
    """
    from .kernel import run_flex
    from .masks import block_mask_for

    kv_len = q_len if kv_len is None else kv_len
    block = (block_size, block_size) if isinstance(block_size, int) else tuple(block_size)
    shape = (1, heads, q_len, head_dim)
    generator = torch.Generator(device="cpu").manual_seed(0)
    q, k, v = (torch.randn(shape[:2] + (n, head_dim), generator=generator).to(device, dtype)
               for n in (q_len, kv_len, kv_len))
    block_mask = block_mask_for(mask, q_len, kv_len, block[0], block[1], q.device)
    results = []
    for options in candidates or CANDIDATES:
        try:
            run_flex(q, k, v, block_mask, None, compile=True, kernel_options=options)
            _synchronize(device)
            best = math.inf
            for _ in range(max(1, repeats)):
                start = time.perf_counter()
                run_flex(q, k, v, block_mask, None, compile=True, kernel_options=options)
                _synchronize(device)
                best = min(best, time.perf_counter() - start)
            results.append({"kernel_options": dict(options), "seconds": best})
        except Exception as error:  # noqa: BLE001 - a refused candidate is a result, not a failure
            results.append({"kernel_options": dict(options), "error": f"{type(error).__name__}: "
                                                                        f"{str(error)[:200]}"})
    timed = [r for r in results if "seconds" in r]
    if not timed:
        raise RuntimeError(f"tilesplash.flex.tune: every candidate failed; first: "
                           f"{results[0]['error']}")
    best = min(timed, key=lambda r: r["seconds"])
    key = tune_key(q.device, mask, q_len, kv_len, head_dim, dtype, block)
    if save:
        store(key, best["kernel_options"], best["seconds"])
    return {"key": key, "best": best["kernel_options"], "results": results}
