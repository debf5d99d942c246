"""FlexAttention's kernel options as tuner candidates, cached per device name.

On a GPU the Triton template's tile (BLOCK_M x BLOCK_N, inside the plan's
sparse block), pipeline stages and warps decide its speed, and the best
choice depends on the GPU, the head dim, the dtype and how sparse the mask
is. tune() times every candidate that fits the device's shared memory
(options.py) on random data with the compiled kernel and stores the fastest
in a JSON cache keyed like the native tuner's keys (tilesplash/tuning.h:
backend, device, dtype, head dim, and the core's TuneShape: mask family,
density bucket, length buckets) plus the sparse block; attention calls read
it and never tune by themselves. On the CPU there is nothing to choose (the
C++ template takes no such options): the lookup answers None.

The file is shared by processes: every store re-reads it under an exclusive
lock on a file beside it and replaces it atomically, so concurrent tuners
lose no entry; an entry that is not a valid record is ignored with a warning
naming the file, as the native tuning cache does.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import tempfile
import time
import warnings
from contextlib import contextmanager
from pathlib import Path

import torch

from .options import (
    LADDER,
    OPTION_NAMES,
    check_options,
    device_limits,
    fits,
    shared_memory_estimate,
)

FORMAT_VERSION = 1

CANDIDATES = ({},) + tuple(dict(o) for o in LADDER) + (
    {"BLOCK_M": 128, "BLOCK_N": 128, "num_stages": 2, "num_warps": 8},
    {"BLOCK_M": 64, "BLOCK_N": 128, "num_stages": 2, "num_warps": 4},
)
"""Every kernel_options the tuner may try: PyTorch's own default ({}: its choice for the
device), the chooser's ladder and 128-key tiles; tune() keeps those that fit the device
and whose tile divides the sparse block."""

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


def tune_key(device, mask, q_len, kv_len, head_dim, dtype, block) -> str:
    """The cache key of one call shape: the device's fields here, the mask's and the
    lengths' from the core (tilesplash._core.tune_shape), as the native tuner keys them."""
    from .. import _core
    from .._mask import core_mask

    fields = dict(_core.tune_shape(core_mask(mask), int(q_len), int(kv_len)))
    fields.update({
        "backend": "flex",
        "device": device_name(device),
        "torch": torch.__version__.split("+")[0],
        "dtype": str(dtype).removeprefix("torch."),
        "head_dim": int(head_dim),
        "density": round(fields["density"], 2),
        "block": f"{block[0]}x{block[1]}",
    })
    return json.dumps(fields, sort_keys=True)


def _valid_entry(entry) -> bool:
    if not isinstance(entry, dict) or not isinstance(entry.get("kernel_options"), dict):
        return False
    try:
        check_options(entry["kernel_options"])
    except ValueError:
        return False
    return True


def _read(path: Path) -> dict:
    """The valid entries of the file (empty when it is missing); a file or entry that
    cannot be used is ignored with a warning naming the file."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as error:
        warnings.warn(f"tilesplash: flex tuning cache {path} cannot be read ({error}); ignored",
                      RuntimeWarning, stacklevel=3)
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        warnings.warn(f"tilesplash: flex tuning cache {path} is corrupt; ignored (tune again "
                      f"to replace it)", RuntimeWarning, stacklevel=3)
        return {}
    if not isinstance(data, dict) or data.get("version") != FORMAT_VERSION or not isinstance(
            data.get("entries"), dict):
        warnings.warn(f"tilesplash: flex tuning cache {path} is not a version-{FORMAT_VERSION} "
                      f"cache; ignored", RuntimeWarning, stacklevel=3)
        return {}
    entries = {}
    for key, entry in data["entries"].items():
        if _valid_entry(entry):
            entries[key] = {"kernel_options": dict(entry["kernel_options"]),
                            "seconds": entry.get("seconds"), "torch": entry.get("torch")}
        else:
            warnings.warn(f"tilesplash: flex tuning cache {path}: entry {key[:120]!r} is not a "
                          f"valid record ({str(entry)[:80]}); ignored", RuntimeWarning,
                          stacklevel=3)
    return entries


def _entries(path: Path) -> dict:
    key = str(path)
    if key not in _loaded:
        _loaded[key] = _read(path)
    return _loaded[key]


_keys: dict = {}


def kernel_options_for(device, mask, q_len, kv_len, head_dim, dtype, block):
    """The tuned kernel options cached for this call's shape on this device, else None
    (run_flex then chooses options that fit the device). Always None on the CPU. The
    key of a shape is computed once per process; the file is read once per process."""
    if torch.device(device).type == "cpu":
        return None
    memo = (str(device), mask, q_len, kv_len, head_dim, dtype, tuple(block))
    key = _keys.get(memo)
    if key is None:
        key = _keys[memo] = tune_key(device, mask, q_len, kv_len, head_dim, dtype, block)
    return stored_options(key)


def stored_options(key: str):
    """The options stored under `key` in the tuning file, when they can be trusted: not
    blindly, since options timed under another PyTorch (another Triton, other defaults)
    may no longer be the fastest, or run at all; the chooser decides then (None). {}
    (PyTorch's default won) is None too."""
    entry = _entries(cache_path()).get(key)
    if entry is None or entry.get("torch") != torch.__version__:
        return None
    return dict(entry["kernel_options"]) or None


@contextmanager
def _locked(path: Path):
    """An exclusive flock on `path`.lock for the block (released if the process dies)."""
    with open(f"{path}.lock", "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def store(key: str, kernel_options: dict, seconds: float, path: Path | None = None) -> None:
    """Adds one entry: the file re-read under the lock, merged, replaced atomically.
    A symlinked file is written through the link: the target (found even when it does
    not exist yet) is locked and replaced, so the link and whoever shares the target
    keep it."""
    kernel_options = check_options(kernel_options)
    path = cache_path() if path is None else path
    target = Path(os.path.realpath(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # what cannot be read was reported when loaded
            entries = _read(target)
        entries[key] = {"kernel_options": kernel_options, "seconds": seconds,
                        "torch": torch.__version__}
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=target.name,
                                             suffix=".tmp")
        try:
            with os.fdopen(handle, "w") as f:
                json.dump({"version": FORMAT_VERSION, "entries": entries}, f, indent=1,
                          sort_keys=True)
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
    _loaded[str(path)] = entries


def _synchronize(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _unusable(options, limits, block, head_dim, dtype_bytes) -> str | None:
    """Why a candidate is not timed on this device, or None."""
    if block[0] % options.get("BLOCK_M", 1) or block[1] % options.get("BLOCK_N", 1):
        return f"its tile does not divide the sparse block {block[0]}x{block[1]}"
    if not set(OPTION_NAMES) <= set(options):
        return None  # PyTorch completes them (its default for the device): timed as given
    if limits is not None and not fits(options, limits, head_dim, dtype_bytes):
        need = shared_memory_estimate(options, head_dim, dtype_bytes)
        return (f"needs about {need} bytes of shared memory; {limits.name} gives "
                f"{limits.shared_memory}")
    return None


def tune(mask, q_len, kv_len=None, *, heads=1, head_dim=128, dtype=torch.bfloat16, device="cuda",
         block_size=128, candidates=None, repeats=3, save=True) -> dict:
    """Times every candidate kernel_options that fits the device on random data and
    (save=True) stores the fastest.

    Returns {"key", "best" (the options), "results": [{"kernel_options", "seconds",
    "skipped" (why it was not timed) or "error"}]}. A candidate the compiler or the
    GPU still refuses is reported with its error and not stored.
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
    limits = device_limits(q.device)
    results = []
    for options in candidates or CANDIDATES:
        options = check_options(options, "candidates")
        reason = _unusable(options, limits, block, head_dim, q.element_size())
        if reason is not None:
            results.append({"kernel_options": options, "skipped": reason})
            continue
        try:
            run = lambda: run_flex(q, k, v, block_mask, None, compile=True,  # noqa: E731
                                   kernel_options=options, fallback=False)
            run()
            _synchronize(device)
            best = math.inf
            for _ in range(max(1, repeats)):
                start = time.perf_counter()
                run()
                _synchronize(device)
                best = min(best, time.perf_counter() - start)
            results.append({"kernel_options": options, "seconds": best})
        except Exception as error:  # noqa: BLE001 - a refused candidate is a result, not a failure
            results.append({"kernel_options": options, "error": f"{type(error).__name__}: "
                                                                 f"{str(error)[:200]}"})
    timed = [r for r in results if "seconds" in r]
    if not timed:
        first = next((r.get("error") or r.get("skipped") for r in results), "no candidates")
        raise RuntimeError(f"tilesplash.flex.tune: no candidate ran; first: {first}")
    best = min(timed, key=lambda r: r["seconds"])
    key = tune_key(q.device, mask, q_len, kv_len, head_dim, dtype, block)
    if save:
        store(key, best["kernel_options"], best["seconds"])
    return {"key": key, "best": best["kernel_options"], "results": results}
