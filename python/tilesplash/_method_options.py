"""The options of one method beyond density: pooled's p, floor and gate, and the families
a mix routes among. Checked here for type and range, in the library's wording; which
method takes them is the library's rule (method_attention_options), applied when the
options meet a geometry."""

from __future__ import annotations

from dataclasses import dataclass

from ._checks import check_float, check_int


@dataclass(frozen=True)
class MethodOptions:
    """p: each query tile's key tiles kept to this cumulative pooled mass instead of
    meeting density, in (0, 1]; floor: key tiles kept per query tile at least, >= 0;
    gate: key tiles whose mean cosine to their mean key is below this are always kept,
    in [-1, 1]; families: the methods a mix routes among (None: every mask family)."""

    p: float | None = None
    floor: int | None = None
    gate: float | None = None
    families: tuple | None = None

    def core_kwargs(self) -> dict:
        return dict(p=self.p, floor=self.floor, gate=self.gate,
                    families=None if self.families is None else list(self.families))


def check_method_options(p=None, floor=None, gate=None, families=None) -> MethodOptions:
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
    return MethodOptions(p, floor, gate, families)
