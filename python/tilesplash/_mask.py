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
from ._checks import INT64_MAX, check_bool, check_float, check_int

_INT64_MIN = -(2**63)


class Mask:
    """A mask: which (query, key) pairs attention keeps.

    Build one with the constructors below or ``Mask.parse(SPEC)``; combine with
    ``|`` (either keeps) and ``&`` (both keep). Masks compare equal when they
    keep the same pairs by construction, hash accordingly, and ``str(mask)``
    is the SPEC (as the CLI's ``--mask``), which ``Mask.parse`` reads back;
    they pickle as it (svg2's cluster masks from VideoAttention.head_mask have
    no SPEC and refuse to pickle). Indices are any int64.
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
        return Mask(_core.Mask.causal(check_int(offset, "offset", _INT64_MIN)))

    @staticmethod
    def local(left: int | None = None, right: int | None = None, offset: int = 0) -> "Mask":
        """Kept when q + offset - left <= k <= q + offset + right; None is unbounded."""
        return Mask(_core.Mask.local(check_int(left, "left", 0, allow_none=True),
                                     check_int(right, "right", 0, allow_none=True),
                                     check_int(offset, "offset", _INT64_MIN)))

    @staticmethod
    def chunked(size: int) -> "Mask":
        """Chunked causal: kept when q // size == k // size and q >= k."""
        return Mask(_core.Mask.chunked(check_int(size, "size", 1)))

    @staticmethod
    def key_range(begin: int, end: int) -> "Mask":
        """Kept when begin <= k < end, for every query: the real keys of a padded sequence
        (``mask & Mask.key_range(0, valid_length)``); tiles past `end` are never visited."""
        begin = check_int(begin, "begin", 0)
        end = check_int(end, "end", 0)
        if end < begin:
            raise ValueError(f"end: expected an int >= begin ({begin}), got {end}")
        return Mask(_core.Mask.key_range(begin, end))

    @staticmethod
    def random(density: float, seed: int = 0) -> "Mask":
        """Each pair kept with probability `density`, reproducibly from `seed` (for tests)."""
        density = check_float(density, "density", "a float in [0, 1]")
        if not 0.0 <= density <= 1.0:
            raise ValueError(f"density: expected a float in [0, 1], got {density}")
        return Mask(_core.Mask.random(density, check_int(seed, "seed", 0, maximum=2**64 - 1)))

    @staticmethod
    def spatial(geometry, band: int | None = None, sink: bool = False, text_full: bool = False,
                *, density: float | None = None) -> "Mask":
        """Sparse VideoGen's spatial mask: video pairs with |q - k| <= band (frame-major).

        Give `band` in tokens, or `density` to pick the band whose mask keeps that
        fraction of the whole map. `sink` adds every key of frame 0 for every video
        query; `text_full` keeps every pair with a text query or key.
        """
        return Mask(_core.Mask.spatial(*_video_args(geometry, band, sink, text_full, density)))

    @staticmethod
    def temporal(geometry, band: int | None = None, sink: bool = False, text_full: bool = False,
                 *, density: float | None = None) -> "Mask":
        """Sparse VideoGen's temporal mask: the same band in token-major order."""
        return Mask(_core.Mask.temporal(*_video_args(geometry, band, sink, text_full, density)))

    @staticmethod
    def radial(geometry, decay: float | None = None, *, density: float | None = None,
               block: int = 128, sink: bool = False) -> "Mask":
        """Radial Attention's energy-decay mask (Li et al., NeurIPS 2025; docs/masks.md).

        Query frame i keeps key frame j when |i - j| <= 1, and otherwise the keys
        within a window that shrinks with the frame distance, on frames that thin
        out with it. Give `decay` (Wan 0.2, HunyuanVideo 0.95) or `density` to pick
        the decay whose mask keeps that fraction of the map. `block`: the paper's B
        (least window, stride unit); `sink` keeps frame 0 for every video query.
        Text rows and columns are kept whole.
        """
        if not isinstance(geometry, _core.VideoGeometry):
            raise TypeError(f"geometry: expected a tilesplash.VideoGeometry, got "
                            f"{type(geometry).__name__}")
        if decay is not None:
            decay = check_float(decay, "decay", "a finite float >= 0 or None")
        if density is not None:
            density = check_float(density, "density", "a float in (0, 1] or None")
        return Mask(_core.Mask.radial(geometry, decay, density, check_int(block, "block", 1),
                                      check_bool(sink, "sink")))

    @staticmethod
    def sta(geometry, window=(3, 3, 3), tile=(6, 8, 8)) -> "Mask":
        """Sliding Tile Attention's mask (Zhang et al., ICML 2025; docs/masks.md).

        Tokens are cut into tiles of tile = (tt, th, tw) latent tokens; a query tile
        keeps the key tiles of a window = (kt, kh, kw) tiles around it, shifted
        inward at the borders. Text rows and columns are kept whole.
        """
        if not isinstance(geometry, _core.VideoGeometry):
            raise TypeError(f"geometry: expected a tilesplash.VideoGeometry, got "
                            f"{type(geometry).__name__}")
        return Mask(_core.Mask.sta(geometry, _triple(window, "window"), _triple(tile, "tile")))

    @staticmethod
    def parse(spec: str) -> "Mask":
        """A mask from its SPEC, e.g. 'causal', 'local:left=64,right=64|causal'."""
        if not isinstance(spec, str):
            raise TypeError(f"mask: expected a SPEC string, got {type(spec).__name__}")
        return _parse(spec)

    def keeps(self, q: int, k: int) -> bool:
        """Whether the pair (q, k) is kept."""
        return self._core.keeps(check_int(q, "q", _INT64_MIN), check_int(k, "k", _INT64_MIN))

    def rows(self, rows, kv_len: int, q_len: int | None = None):
        """The mask on a few query rows: numpy bool [len(rows), kv_len], entry [i, k]
        = keeps(rows[i], k). rows: integer indices in [0, q_len) (q_len defaults to
        kv_len; a video mask needs both equal to its token count). For a router on
        another backend: the sampled rows' masks, without a plan."""
        import numpy as np

        kv_len = check_int(kv_len, "kv_len", 1)
        q_len = kv_len if q_len is None else check_int(q_len, "q_len", 1)
        indices = np.asarray(rows)
        if indices.ndim != 1 or not (indices.size == 0 or np.issubdtype(indices.dtype, np.integer)):
            raise TypeError(f"rows: expected a 1-d sequence of integer indices, got "
                            f"{indices.dtype} with shape {indices.shape}")
        return self._core.rows(np.ascontiguousarray(indices, dtype=np.int64), q_len, kv_len)

    def tile_granular(self, q_len: int, kv_len: int, block_q: int = 128,
                      block_kv: int = 128) -> "Mask":
        """This mask over a q_len x kv_len map rounded out to whole block_q x block_kv
        tiles (anchored at 0): every pair of a tile in which this mask keeps a pair
        is kept, pairs outside the map never are. A plan of it with the same blocks
        has no partial tile. Not a SPEC: it does not pickle."""
        return Mask(self._core.tile_granular(check_int(q_len, "q_len", 1),
                                             check_int(kv_len, "kv_len", 1),
                                             check_int(block_q, "block_q", 1),
                                             check_int(block_kv, "block_kv", 1)))

    def classify(self, rows, cols) -> int:
        """Exact kind of the block rows x cols, each a (begin, end) pair of indices:
        0 no pair kept, 1 some, 2 all (empty ranges give 0). O(1) for the
        built-in masks; ring attention skips the steps whose block gives 0."""
        (q0, q1), (k0, k1) = _range(rows, "rows"), _range(cols, "cols")
        return _core.classify_window(self._core, q0, q1, k0, k1)

    @staticmethod
    def any_of(masks) -> "Mask":
        """The OR of every mask in `masks` (Masks or SPEC strings), built in one step.

        Kept when any keeps. Costs O(total terms), where chaining
        ``a | b | c | ...`` over n masks costs O(n^2): each ``|`` makes a
        complete mask, its SPEC text included, and so copies the growing OR.
        """
        return Mask(_core.Mask.any_of(_operands(masks, "any_of")))

    @staticmethod
    def all_of(masks) -> "Mask":
        """The AND of every mask in `masks` (Masks or SPEC strings), built in one step;
        kept when all keep. O(total terms), as any_of."""
        return Mask(_core.Mask.all_of(_operands(masks, "all_of")))

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
        # Pickles as its SPEC, so refuse here, at dumps, a mask whose str() does
        # not parse back to it (svg2's per-head cluster masks carry a token
        # assignment no SPEC holds): loads() in a worker would fail far later.
        try:
            parses_back = _core.Mask.parse(self._spec) == self._core
        except ValueError:
            parses_back = False
        if not parses_back:
            raise TypeError(f"mask: {self._spec!r} cannot be pickled: its str() is not a SPEC "
                            "that parses back to it (a cluster mask from "
                            "VideoAttention.head_mask()); pickle the VideoAttention's inputs "
                            "instead, or keep the mask in this process")
        return (Mask.parse, (self._spec,))

    # Immutable values: a copy is the mask itself (also for cluster masks,
    # which cannot be pickled).
    def __copy__(self) -> "Mask":
        return self

    def __deepcopy__(self, memo) -> "Mask":
        return self


def _operands(masks, who):
    """The cores of a non-empty iterable of Masks or SPEC strings."""
    if isinstance(masks, (str, Mask)):
        raise TypeError(f"masks: Mask.{who} takes an iterable of masks, got one "
                        f"{type(masks).__name__}; wrap it in a list")
    try:
        items = list(masks)
    except TypeError:
        raise TypeError(f"masks: Mask.{who} takes an iterable of Masks or SPEC strings, got "
                        f"{type(masks).__name__}") from None
    if not items:
        raise ValueError(f"masks: Mask.{who} needs at least one mask, got none")
    return [as_mask(m)._core for m in items]


def _video_args(geometry, band, sink, text_full, density):
    """The spatial / temporal constructors' arguments, checked; the core checks
    that exactly one of band and density is given."""
    if not isinstance(geometry, _core.VideoGeometry):
        raise TypeError(f"geometry: expected a tilesplash.VideoGeometry, got {type(geometry).__name__}")
    if density is not None:
        density = check_float(density, "density", "a float in (0, 1] or None")
    return (geometry, check_int(band, "band", 0, allow_none=True), check_bool(sink, "sink"),
            check_bool(text_full, "text_full"), density)


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
    if begin < 0 or end < begin or end > INT64_MAX:
        raise ValueError(f"{name}: expected 0 <= begin <= end <= 2^63 - 1, got ({begin}, {end})")
    return begin, end


def _triple(value, name):
    """Three ints >= 1 (t, h, w)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 3:
        raise TypeError(f"{name}: expected three ints (t, h, w), got {value!r}")
    return tuple(check_int(v, name, 1) for v in value)


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


def spec_of(mask) -> str:
    """The SPEC of a Mask, or a SPEC string as given (checked where it is parsed,
    in the torch op); TypeError naming `mask` otherwise. Calls nothing in the
    extension, so torch.compile(fullgraph=True) traces it."""
    if isinstance(mask, Mask):
        return mask._spec
    if isinstance(mask, str):
        return mask
    raise TypeError(f"mask: expected a SPEC string or a tilesplash.Mask, got {type(mask).__name__}")


def core_mask(mask) -> _core.Mask:
    """The library's Mask behind a Mask or a SPEC string (what _core functions take)."""
    return as_mask(mask)._core
