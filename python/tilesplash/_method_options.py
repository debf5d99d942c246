"""The options of a method beyond its density: pooled's p, floor, gate and order, the
families a mix routes among, and an error target with its ladder. Checked here for
type and range, in the library's wording; which method takes p, floor, gate, order
and families is the library's rule (method_attention_options), applied when the options
meet a geometry."""

from __future__ import annotations

from dataclasses import dataclass

from . import _core
from ._checks import check_float, check_int
from ._methods import cluster_choice, method_flag


@dataclass(frozen=True)
class MethodOptions:
    """p: each query tile's key tiles kept to this cumulative pooled mass instead of
    meeting density, in (0, 1]; floor: key tiles kept per query tile at least, >= 0;
    gate: key tiles whose mean cosine to their mean key is below this are always kept,
    in [-1, 1]; order: the row order pooled heads cut their tiles in, "frame", "token"
    or "auto" (None: "auto", each head the one that scores better); families: the
    methods a mix routes among (None: every mask family)."""

    p: float | None = None
    floor: int | None = None
    gate: float | None = None
    families: tuple | None = None
    order: str | None = None

    def core_kwargs(self) -> dict:
        return dict(p=self.p, floor=self.floor, gate=self.gate, order=self.order,
                    families=None if self.families is None else list(self.families))


ORDERS = ("auto", "frame", "token")


def check_method_options(p=None, floor=None, gate=None, families=None,
                         order=None) -> MethodOptions:
    """The options as the library takes them; TypeError / ValueError naming the argument
    and its expected range otherwise."""
    if p is not None:
        p = check_float(p, "p", "a cumulative mass in (0, 1] or None")
        if not 0.0 < p <= 1.0:
            raise ValueError(f"p: expected a cumulative mass in (0, 1], got {p}")
    floor = check_int(floor, "floor", 0, allow_none=True)
    if gate is not None:
        gate = check_float(gate, "gate", "a cosine similarity in [-1, 1] or None")
        if not -1.0 <= gate <= 1.0:
            raise ValueError(f"gate: expected a cosine similarity in [-1, 1], got {gate}")
    if families is not None:
        if isinstance(families, (str, bytes)) or not hasattr(families, "__iter__"):
            raise TypeError(f"families: expected a sequence of method names or None, got "
                            f"{type(families).__name__}")
        families = tuple(families)
        for i, name in enumerate(families):
            if not isinstance(name, str):
                raise TypeError(f"families[{i}]: expected a method name, got "
                                f"{type(name).__name__}")
        if not families:
            raise ValueError("families: expected at least one method name, or None for every "
                             "mask family")
    if order is not None and not isinstance(order, str):
        raise TypeError(f"order: expected one of {', '.join(ORDERS)} or None, got "
                        f"{type(order).__name__}")
    if order is not None and order not in ORDERS:
        raise ValueError(f"order: expected one of {', '.join(ORDERS)} or None, got {order!r}")
    return MethodOptions(p, floor, gate, families, order)


def check_error_target(error, densities, method=None):
    """(error, densities) checked (by the library's rules) for VideoAttention: floats, or None.
    With `method`, also what the method allows: no ladder for svg2's clusters. Shared with
    tilesplash.diffusers.enable, so it refuses at once what a layer's first call would."""
    if error is not None:
        error = check_float(error, "error", "a relative L2 error > 0 (e.g. 0.05) or None")
        _core.check_error_target(error)
    if densities is not None and error is None:
        raise ValueError("densities: a density ladder applies with error= only (give error too)")
    if (error is not None and method is not None and method_flag(method, "data_driven")
            and method_flag(method, "choice") == cluster_choice()):
        raise ValueError(f"error: method {method!r} runs each head's own clusters and has no "
                         f"density ladder; use a method with candidates (svg, radial, sta, ...)")
    if densities is not None:
        if isinstance(densities, (str, bytes)) or not hasattr(densities, "__iter__"):
            raise TypeError(f"densities: expected a sequence of floats in (0, 1] or None, got "
                            f"{type(densities).__name__}")
        densities = [check_float(d, f"densities[{i}]", "a float in (0, 1]")
                     for i, d in enumerate(densities)]
        _core.check_density_ladder(densities)
    return error, densities
