"""Every scalar argument check of the Python package, in one place and one wording.

Each check returns the value as the library uses it or raises TypeError /
ValueError whose message starts with the argument's name and says what was
expected: "density: expected a float in (0, 1], got 1.5". A front door that
names itself as well (tilesplash.diffusers.enable) wraps its checks in
prefixed(who), which puts "who: " before the same message; no front door
writes its own validator. Tensor checks (layouts, dtypes, devices) are in
_tensors.py; the backend, method and context names are checked by their own
registries (_backends, _methods, _threading) with the same wording.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np

from . import _core


@contextlib.contextmanager
def prefixed(who: str):
    """TypeError / ValueError / NotImplementedError raised inside come out as
    "who: <message>", the same type."""
    try:
        yield
    except (TypeError, ValueError, NotImplementedError) as e:
        raise type(e)(f"{who}: {e}") from None


PRECISIONS = ("default", "int8")


def check_granularity(granularity) -> str:
    """"token" or "tile" (masks rounded out to whole kernel tiles, docs/masks.md)."""
    if not isinstance(granularity, str):
        raise TypeError(f"granularity: expected 'token' or 'tile', got "
                        f"{type(granularity).__name__}")
    return _core.check_granularity(granularity)


def check_precision(precision) -> str:
    """"default" or "int8" (8-bit Q.K^T, docs/kernel.md); ValueError naming it otherwise."""
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise ValueError(f"precision: expected 'default' or 'int8', got {precision!r}")
    return precision



INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
MAX_THREADS = _core.MAX_THREADS  # threads of a call or a context: 0 (every core) to this


def check_int(value, name: str, minimum: int, allow_none: bool = False, maximum: int = INT64_MAX):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        expected = "an int or None" if allow_none else "an int"
        raise TypeError(f"{name}: expected {expected}, got {type(value).__name__}")
    value = int(value)
    if not minimum <= value <= maximum:
        raise ValueError(f"{name}: expected an int in [{_shown(minimum)}, {_shown(maximum)}], "
                         f"got {value}")
    return value


def _shown(bound: int) -> str:
    """A range end as messages print it: the int64 / uint64 limits by name."""
    return {INT64_MAX: "2^63 - 1", -INT64_MAX - 1: "-2^63", 2**64 - 1: "2^64 - 1"}.get(bound,
                                                                                   str(bound))


def check_bool(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected True or False, got {type(value).__name__}")
    return bool(value)


def check_float(value, name: str, expected: str) -> float:
    """A real number (int or float, not bool) as a float; `expected` says its range."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name}: expected {expected}, got {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{name}: expected {expected}, got an int beyond the float range") from None


# The scales the kernel's float32 can use, as plain float comparisons (no
# NumPy: torch.compile traces this check). Above MIN_SCALE a scale rounds to a
# float32 > 0; MAX_SCALE is the largest float32 whose product with log2(e),
# which the kernel folds into its exponent in float32, is finite
# (kernel_limits::kMaxScale).
MIN_SCALE = 2.0**-150  # exclusive: it rounds to 0 in float32
MAX_SCALE = 2.3586574359122396e38  # inclusive


def check_scale(scale):
    """None, or a scale in (MIN_SCALE, MAX_SCALE]: > 0 once rounded to float32,
    and scale * log2(e) finite in float32."""
    if scale is None:
        return None
    value = check_float(scale, "scale", "a positive float or None")
    if not MIN_SCALE < value <= MAX_SCALE:  # NaN fails too
        raise ValueError(f"scale: expected a value in (2^-150, {MAX_SCALE:.8g}] (> 0 in "
                         f"float32, scale * log2(e) within float32), got {value}")
    return value


def check_fraction(value, name: str, allow_none: bool = False):
    """A float in (0, 1] (a density, a budget); None too when allow_none."""
    if value is None and allow_none:
        return None
    expected = "a float in (0, 1]" + (" or None" if allow_none else "")
    value = check_float(value, name, expected)
    if not 0.0 < value <= 1.0:  # NaN fails too
        raise ValueError(f"{name}: expected {expected}, got {value}")
    return value


@dataclass(frozen=True)
class BlockRule:
    """The tile sizes a backend takes: block_q and block_kv multiples of their step
    in [step, top] (block_q from 1 where its step is 1)."""

    q_step: int
    q_top: int
    kv_step: int
    kv_top: int
    who: str  # said when a size breaks the rule: "the native kernel", "the flex backend"


# kernel_limits.h: block_q in [1, 4096], block_kv a multiple of 64 in [64, 1024].
NATIVE_BLOCKS = BlockRule(1, _core.MAX_BLOCK_Q, _core.BLOCK_KV_MULTIPLE, _core.MAX_BLOCK_KV,
                          "the native kernel")
# FlexAttention's GPU kernels tile a block by 16 to 128 rows and keys.
FLEX_BLOCKS = BlockRule(16, _core.MAX_BLOCK_Q, 16, _core.MAX_BLOCK_Q, "the flex backend")


def check_blocks(block_q, block_kv, rule: BlockRule = NATIVE_BLOCKS):
    """(block_q, block_kv): None (the tuned choice) or sizes `rule` allows."""
    return (_check_block(block_q, "block_q", rule.q_step, rule.q_top, rule.who),
            _check_block(block_kv, "block_kv", rule.kv_step, rule.kv_top, rule.who))


def _check_block(value, name, step, top, who):
    value = check_int(value, name, step, allow_none=True, maximum=top)
    if value is not None and value % step:
        raise ValueError(f"{name}: {who} needs a multiple of {step} in [{step}, {top}], got "
                         f"{value}")
    return value
