"""FlexAttention kernel options that fit the GPU, and the step down when one does not.

On a CUDA GPU, compiled FlexAttention is a Triton template whose tile
(BLOCK_M query rows x BLOCK_N keys), pipeline depth (num_stages) and warps
decide how much shared memory one program needs. PyTorch's defaults are
sized for masks computed from indices; tilesplash's generic mask_mod gathers
the tile table and the bitmask words per element, and Triton buffers those
gathers per pipeline stage too. On an H200 (227 KB per block) the default
for bf16, d 128 (BLOCK_M 128, BLOCK_N 64, 3 stages) then asked for 256 KB and
did not compile; 128/64 with 2 stages and 64/64 with 3 did (DESIGN.md §11).

So the options are chosen here, per call shape, from the device's shared
memory per block (its opt-in maximum), its compute capability, the head dim,
the dtype and what the mask_mod needs:

- `LADDER` lists the options tried, fastest first; `choices()` keeps those
  whose estimated shared memory fits and whose tile divides the sparse block;
- `shared_memory_estimate()` is a deliberately conservative model (Q once,
  K and V per stage, and for the table mask_mod two int32 gathers per stage),
  calibrated on the H200's measured refusals and successes;
- a compile the GPU still refuses for resources is retried with the next
  choice by `first_that_runs()` and the refusal is remembered for the
  process, so a user never sees it and later calls start where it ran.

Everything here is plain Python over a `DeviceLimits` record, so the choice
is tested on the CPU against a table of GPUs (tests/python/test_flex_options.py)
and the retry by injecting the error.
"""

from __future__ import annotations

import re
import threading
import warnings
from dataclasses import dataclass

TABLE = "table"
"""A mask_mod that gathers from the plan's tables (tilesplash's generic one)."""
INDEX = "index"
"""A mask_mod computed from indices alone (no gathers): PyTorch's defaults fit it."""
MASK_MODS = (TABLE, INDEX)
ROWS = "rows"
"""tilesplash's per-row mask_mod (masks.py): loads indexed by the query alone, sized as INDEX."""
MASK_MOD_TAG = "_tilesplash_mask_mod"
"""The attribute a tilesplash BlockMask carries its mask_mod's kind in (ROWS, TABLE or
NO_MASK)."""
NO_MASK = "none"
"""No mask_mod at all: a BlockMask of full tiles only (tile-granular plans), sized as INDEX."""
FULL_ONLY_TAG = "_tilesplash_full_only"
"""The attribute a BlockMask with no partial tile carries its compiled twin in: the same
block lists with no mask_mod (PyTorch's noop), which compiled FlexAttention runs instead.
Eager FlexAttention ignores the block lists and calls mask_mod on every pair, so it keeps
the exact one."""


def mask_mod_kind(block_mask) -> str:
    """TABLE or INDEX: what a BlockMask's mask_mod needs of the kernel. A BlockMask not
    made by tilesplash counts as TABLE (the safe side)."""
    return INDEX if getattr(block_mask, MASK_MOD_TAG, TABLE) in (ROWS, NO_MASK) else TABLE


@dataclass(frozen=True)
class DeviceLimits:
    """What bounds a Triton program on one GPU."""

    name: str
    capability: tuple[int, int]
    shared_memory: int  # bytes one block may use (the opt-in maximum)


# Shared memory per block by compute capability where PyTorch does not report
# it (CUDA programming guide, "Features and Technical Specifications").
_SHARED_MEMORY_BY_CAPABILITY = {
    (7, 0): 98_304, (7, 2): 98_304, (7, 5): 65_536,
    (8, 0): 166_912, (8, 6): 101_376, (8, 7): 166_912, (8, 9): 101_376,
    (9, 0): 232_448, (10, 0): 232_448, (10, 3): 232_448, (11, 0): 232_448, (12, 0): 101_376,
}
_SHARED_MEMORY_FALLBACK = 49_152  # every CUDA GPU since Fermi gives a block this much


def device_limits(device) -> DeviceLimits | None:
    """The limits of a CUDA device; None for any other device (nothing to choose there:
    PyTorch's CPU template takes no such options)."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return None
    props = torch.cuda.get_device_properties(device)
    capability = (int(props.major), int(props.minor))
    shared = int(getattr(props, "shared_memory_per_block_optin", 0) or 0)
    if shared <= 0:
        shared = _SHARED_MEMORY_BY_CAPABILITY.get(capability, _SHARED_MEMORY_FALLBACK)
    return DeviceLimits(str(props.name), capability, shared)


def _options(block_m, block_n, stages, warps) -> dict:
    return {"BLOCK_M": block_m, "BLOCK_N": block_n, "num_stages": stages, "num_warps": warps}


LADDER = (
    _options(128, 64, 3, 8),  # PyTorch's Hopper/Ampere default for 16-bit d 128
    _options(128, 64, 2, 8),  # what ran tilesplash's table mask_mod on the H200
    _options(128, 32, 3, 4),
    _options(64, 64, 3, 4),
    _options(64, 64, 2, 4),
    _options(64, 32, 3, 4),
    _options(64, 32, 2, 4),
    _options(32, 32, 2, 4),
    _options(32, 32, 1, 4),
    _options(16, 16, 1, 2),
)
"""The kernel options tried, fastest first on the GPUs measured; each later entry needs
less shared memory than some earlier one, the last fits any CUDA GPU."""

OPTION_NAMES = ("BLOCK_M", "BLOCK_N", "num_stages", "num_warps")


def padded_head_dim(head_dim: int) -> int:
    """The template pads the head dim to a power of two (at least 16)."""
    return max(16, 1 << (int(head_dim) - 1).bit_length())


def shared_memory_estimate(options: dict, head_dim: int, dtype_bytes: int,
                           mask_mod: str = TABLE) -> int:
    """Bytes of shared memory one program of these options is expected to need.

    Q's tile is loaded once, K's and V's once per pipeline stage; the table
    mask_mod adds two int32 [BLOCK_M, BLOCK_N] gathers (tile kind, bitmask word)
    per stage. Over-estimates rather than under: on the H200, 128/64/3 with the
    table mask_mod is estimated at 320 KB (it asked for 256 KB and failed),
    128/64/2 at 224 KB and 64/64/3 at 208 KB (both ran under 227 KB).
    """
    m, n = int(options["BLOCK_M"]), int(options["BLOCK_N"])
    stages = max(1, int(options["num_stages"]))
    d = padded_head_dim(head_dim)
    operands = dtype_bytes * d * (m + 2 * n * stages)
    gathers = 2 * 4 * m * n * stages if mask_mod == TABLE else 0
    return operands + gathers


def fits(options: dict, limits: DeviceLimits, head_dim: int, dtype_bytes: int,
         mask_mod: str = TABLE) -> bool:
    return shared_memory_estimate(options, head_dim, dtype_bytes, mask_mod) <= limits.shared_memory


def divides(options: dict, block) -> bool:
    """The Triton tile must divide the BlockMask's sparse block (block_q, block_kv)."""
    return block[0] % int(options["BLOCK_M"]) == 0 and block[1] % int(options["BLOCK_N"]) == 0


def choices(limits: DeviceLimits | None, head_dim: int, dtype_bytes: int, block,
            mask_mod: str = TABLE) -> list:
    """The kernel options to try for one call shape, first choice first.

    None (no device limits: the CPU) gives [None]: nothing to choose. A mask_mod
    computed from indices gives [None] followed by the fitting ladder: PyTorch's
    own default for the device is sized for such masks. The table mask_mod gives
    the fitting ladder entries whose tile divides the block (the smallest entry
    always, so the list is never empty). PyTorch's default (None) goes first only where its
    tiles divide the block (multiples of 128)."""
    if limits is None:
        return [None]
    if mask_mod not in MASK_MODS:
        raise ValueError(f"mask_mod: expected one of {MASK_MODS}, got {mask_mod!r}")
    usable = [o for o in LADDER if divides(o, block)] or [LADDER[-1]]
    fitting = [dict(o) for o in usable if fits(o, limits, head_dim, dtype_bytes, mask_mod)]
    if not fitting:
        fitting = [dict(usable[-1])]
    # PyTorch's default tiles reach 128: they divide only a block of multiples of 128 (a
    # sparse block of 64 or 192 would be refused by inductor).
    default = mask_mod == INDEX and block[0] % 128 == 0 and block[1] % 128 == 0
    return ([None] if default else []) + fitting


def check_options(options, who: str = "kernel_options") -> dict | None:
    """A kernel_options dict checked: the four known names, positive integers, tiles powers
    of two of at least 16 (Triton's dot needs it). ValueError naming `who` otherwise."""
    if options is None:
        return None
    if not isinstance(options, dict):
        raise ValueError(f"{who}: expected a dict of {', '.join(OPTION_NAMES)}, got "
                         f"{type(options).__name__}")
    unknown = sorted(set(options) - set(OPTION_NAMES))
    if unknown:
        raise ValueError(f"{who}: unknown option(s) {unknown}; expected {', '.join(OPTION_NAMES)}")
    checked = {}
    for name, value in options.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{who}: {name} must be a positive integer, got {value!r}")
        if name.startswith("BLOCK_") and (value < 16 or value & (value - 1)):
            raise ValueError(f"{who}: {name} must be a power of two >= 16, got {value}")
        checked[name] = value
    return checked


_RESOURCE_ERROR = re.compile(r"out of resource|OutOfResources|No valid triton configs|"
                             r"Hardware limit|shared memory|"
                             # inductor's refusal of a tile that does not divide the block
                             r"must be divisible by the selected tile sizes", re.IGNORECASE)


def is_resource_error(error: BaseException) -> bool:
    """A compile or launch the GPU refused for lack of shared memory or registers."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if _RESOURCE_ERROR.search(f"{type(error).__name__}: {error}"):
            return True
        error = error.__cause__ or error.__context__
    return False


_lock = threading.Lock()
_refused: set = set()
_working: dict = {}


def _key(options) -> tuple:
    return tuple(sorted((options or {}).items()))


def first_that_runs(call, candidates: list, context: tuple, *, warn_first: bool = False):
    """call(options) with the first candidate the device accepts.

    A resource refusal moves on to the next candidate and is remembered for
    `context` (device, head dim, dtype, mask_mod kind) for the rest of the
    process; the options that ran are remembered too, so the next call of the
    same context starts there. Any other error is the caller's. warn_first:
    warn (once per context) when the first candidate was the caller's own
    choice and had to be replaced.
    """
    with _lock:
        known = _working.get(context)
        order = [c for c in candidates if (context, _key(c)) not in _refused]
    if known is not None and known in [_key(c) for c in order]:
        order.sort(key=lambda c: _key(c) != known)
    if not order:
        order = [candidates[-1]]
    errors = []
    for options in order:
        try:
            result = call(options)
        except Exception as error:  # noqa: BLE001 - classified right below
            if not is_resource_error(error):
                raise
            with _lock:
                _refused.add((context, _key(options)))
            errors.append(f"{options}: {str(error).splitlines()[0][:160] if str(error) else type(error).__name__}")
            continue
        with _lock:
            _working[context] = _key(options)
        if errors and warn_first and order[0] is candidates[0]:
            warnings.warn(f"tilesplash: FlexAttention kernel options {candidates[0]} do not fit "
                          f"this GPU; ran with {options} instead", RuntimeWarning, stacklevel=3)
        return result
    raise RuntimeError("tilesplash: every FlexAttention kernel option was refused by the GPU "
                       f"for lack of resources ({context}); tried: " + "; ".join(errors))


def used() -> list:
    """[(context, options)] that ran, one per context, in the order first seen: what a
    benchmark reports as the kernel options this process chose."""
    with _lock:
        return [(context, dict(key) if key else None) for context, key in _working.items()]


def forget() -> None:
    """Forget every refusal and success remembered (tests; a new driver)."""
    with _lock:
        _refused.clear()
        _working.clear()
