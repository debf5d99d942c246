"""tilesplash.Mask: which query-key pairs are kept, as a composable value.

A thin Python shell around the library's Mask (``tilesplash._core.Mask``) that
keeps its SPEC string as a plain attribute, so code traced by torch.compile can
hand the mask to the ``tilesplash::attention`` custom op without calling into
the extension.
"""

from __future__ import annotations

import operator
from functools import lru_cache

from . import _core


class Mask:
    """A mask: which (query, key) pairs attention keeps.

    Build one with the constructors below or ``Mask.parse(SPEC)``; combine with
    ``|`` (either keeps) and ``&`` (both keep). Masks compare equal when they
    keep the same pairs by construction, hash accordingly, and ``str(mask)``
    is the SPEC (as the CLI's ``--mask``), which ``Mask.parse`` reads back.
    """

    __slots__ = ("_core", "_spec", "_hash")

    def __init__(self, core: _core.Mask):
        if not isinstance(core, _core.Mask):
            raise TypeError(
                "Mask: build masks with Mask.causal(), Mask.local(), ..., or Mask.parse(SPEC)"
            )
        self._core = core
        self._spec = str(core)
        self._hash = hash(core)

    @staticmethod
    def dense() -> "Mask":
        """Every pair kept."""
        return Mask(_core.Mask.dense())

    @staticmethod
    def causal(offset: int = 0) -> "Mask":
        """Kept when q + offset >= k."""
        return Mask(_core.Mask.causal(offset))

    @staticmethod
    def local(left: int | None = None, right: int | None = None, offset: int = 0) -> "Mask":
        """Kept when q + offset - left <= k <= q + offset + right; None is unbounded."""
        return Mask(_core.Mask.local(left, right, offset))

    @staticmethod
    def chunked(size: int) -> "Mask":
        """Chunked causal: kept when q // size == k // size and q >= k."""
        return Mask(_core.Mask.chunked(size))

    @staticmethod
    def random(density: float, seed: int = 0) -> "Mask":
        """Each pair kept with probability `density`, reproducibly from `seed` (for tests)."""
        return Mask(_core.Mask.random(density, seed))

    @staticmethod
    def spatial(geometry, band: int | None = None, sink: bool = False, text_full: bool = False,
                *, density: float | None = None) -> "Mask":
        """Sparse VideoGen's spatial mask: video pairs with |q - k| <= band (frame-major).

        Give `band` in tokens, or `density` to pick the band whose mask keeps that
        fraction of the whole map. `sink` adds every key of frame 0 for every video
        query; `text_full` keeps every pair with a text query or key.
        """
        return Mask(_core.Mask.spatial(geometry, band, sink, text_full, density))

    @staticmethod
    def temporal(geometry, band: int | None = None, sink: bool = False, text_full: bool = False,
                 *, density: float | None = None) -> "Mask":
        """Sparse VideoGen's temporal mask: the same band in token-major order."""
        return Mask(_core.Mask.temporal(geometry, band, sink, text_full, density))

    @staticmethod
    def parse(spec: str) -> "Mask":
        """A mask from its SPEC, e.g. 'causal', 'local:left=64,right=64|causal'."""
        if not isinstance(spec, str):
            raise TypeError(f"mask: expected a SPEC string, got {type(spec).__name__}")
        return _parse(spec)

    def keeps(self, q: int, k: int) -> bool:
        """Whether the pair (q, k) is kept."""
        return self._core.keeps(q, k)

    def classify(self, rows, cols) -> int:
        """Exact kind of the block rows x cols, each a (begin, end) pair of indices:
        0 no pair kept, 1 some, 2 all (empty ranges give 0). O(1) for the
        built-in masks; ring attention skips the steps whose block gives 0."""
        (q0, q1), (k0, k1) = _range(rows, "rows"), _range(cols, "cols")
        return _core.classify_window(self._core, q0, q1, k0, k1)

    def __or__(self, other: "Mask") -> "Mask":
        if not isinstance(other, Mask):
            return NotImplemented
        return Mask(self._core | other._core)

    def __and__(self, other: "Mask") -> "Mask":
        if not isinstance(other, Mask):
            return NotImplemented
        return Mask(self._core & other._core)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Mask):
            return NotImplemented
        return self._core == other._core

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        return self._spec

    def __repr__(self) -> str:
        return f"tilesplash.Mask.parse({self._spec!r})"

    def __reduce__(self):
        return (Mask.parse, (self._spec,))


def _range(value, name):
    try:
        begin, end = value
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected a (begin, end) pair of ints, got {value!r}") from None
    try:
        if isinstance(begin, bool) or isinstance(end, bool):
            raise TypeError
        begin, end = operator.index(begin), operator.index(end)
    except TypeError:
        raise TypeError(f"{name}: expected a (begin, end) pair of ints, got {value!r}") from None
    if begin < 0 or end < begin:
        raise ValueError(f"{name}: expected 0 <= begin <= end, got ({begin}, {end})")
    return begin, end


@lru_cache(maxsize=256)
def _parse(spec: str) -> Mask:
    return Mask(_core.Mask.parse(spec))


def as_mask(mask) -> Mask:
    """A Mask from a Mask or a SPEC string; TypeError naming `mask` otherwise."""
    if isinstance(mask, Mask):
        return mask
    if isinstance(mask, str):
        return _parse(mask)
    raise TypeError(f"mask: expected a SPEC string or a tilesplash.Mask, got {type(mask).__name__}")
