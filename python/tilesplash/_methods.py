"""tilesplash.methods(): the library's registry of video attention methods."""

from __future__ import annotations

from . import _core


def methods() -> dict[str, dict]:
    """Every registered video attention method, in registry order.

    name -> {"summary": what it is, "row_order": the order its heads run Q, K
    and V in, "spec": whether a mask SPEC term of that name exists,
    "candidates": whether its masks are built from a density (False for
    svg2, whose heads run their own clusters), "mask_names": the names its
    heads report and `force` accepts besides "dense" when they do not depend
    on the geometry (empty for sta and mix, whose windows do), "takes_band":
    whether its heads share one band given in tokens (svg), "data_driven":
    whether each head's masks come from its own Q and K (svg2), "choice":
    the choice such heads report (else None)}. Code asks these flags, never a
    method's name.
    VideoAttention(method=...) and tilesplash.diffusers.enable(method=...)
    take these names; docs/masks.md describes each method.
    """
    return _core.methods()


def method_names() -> tuple[str, ...]:
    """The registered method names, in registry order."""
    return tuple(_core.methods())


def method_flag(method: str, flag: str):
    """The registry's `flag` ("takes_band", "data_driven", "choice") of a registered method."""
    return _core.methods()[method][flag]


def default_method() -> str:
    """The method front doors run when none is named ("svg"): the registry's declaration."""
    return _core.default_method()


DEFAULT_METHOD = _core.default_method()


def cluster_choice() -> str:
    """The choice heads of the data-driven method report ("svg2"): its registry entry's."""
    return _core.cluster_choice()


def check_method(method, who: str = "method") -> str:
    """`method` when it is a registered name; TypeError / ValueError naming them otherwise."""
    names = method_names()
    if not isinstance(method, str):
        raise TypeError(f"{who}: expected one of {', '.join(map(repr, names))}, got "
                        f"{type(method).__name__}")
    if method not in names:
        raise ValueError(f"{who}: expected one of {', '.join(map(repr, names))}, got {method!r}")
    return method
