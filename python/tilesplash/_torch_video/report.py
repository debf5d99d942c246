"""A call's report whose per-head part is read from the device only when asked.

The router's choices, MSEs and errors stay on the device during a call
(route.py); turning them into the report's per-head dicts needs them on the
host, which waits for the device. So the report is a dict whose "heads" is
filled on first use: reading any key, iterating, `dict(report)`,
`json.dumps(report)` or printing it fills it (one host read of every batch
entry's small tables), and a call whose report is never read never waits.
"""

from __future__ import annotations

from .._methods import DEFAULT_METHOD, method_flag


class LazyReport(dict):
    """A report dict whose "heads" come from `fill()` (a list of head dicts) on first use."""

    __slots__ = ("_fill",)

    def __init__(self, values: dict, fill):
        super().__init__(values)
        self._fill = fill
        dict.__setitem__(self, "heads", [])

    def _filled(self) -> "LazyReport":
        fill, self._fill = self._fill, None
        if fill is not None:
            dict.__setitem__(self, "heads", fill())
        return self

    @property
    def pending(self) -> bool:
        """Whether the per-head part is still on the device."""
        return self._fill is not None

    def __getitem__(self, key):
        return dict.__getitem__(self._filled(), key)

    def get(self, key, default=None):
        return dict.get(self._filled(), key, default)

    def __iter__(self):
        return dict.__iter__(self._filled())

    def keys(self):
        return dict.keys(self._filled())

    def values(self):
        return dict.values(self._filled())

    def items(self):
        return dict.items(self._filled())

    def copy(self) -> dict:
        return dict(self._filled().items())

    def __eq__(self, other):
        return dict.__eq__(self._filled(), other)

    __hash__ = None

    def __repr__(self) -> str:
        return dict.__repr__(self._filled())

    def updated(self, fields: dict, head_offset: int = 0) -> "LazyReport":
        """A copy with `fields` added and its heads numbered from `head_offset`, still
        pending when these are (a caller that files the report away, as the diffusers
        drop-in does per call, need not wait for the device)."""
        if self._fill is None:
            fill = lambda heads=self["heads"]: heads  # noqa: E731
            values = {key: value for key, value in self.items() if key != "heads"}
        else:
            fill = self._fill
            values = {key: dict.__getitem__(self, key) for key in dict.keys(self) if key != "heads"}
        if head_offset:
            fill = lambda inner=fill: [dict(head, head=head["head"] + head_offset)  # noqa: E731
                                       for head in inner()]
        return LazyReport({**values, **fields}, fill)

    def peek(self, key, default=None):
        """A value other than "heads", without filling the heads."""
        return dict.get(self, key, default)

    def __reduce__(self):  # pickles as the plain dict it stands for
        return (dict, (dict(self.items()),))


# The native report's mse_spatial / mse_temporal keys: the default method's
# pair of masks (svg's), asked of the registry.
_LEGACY_MSE_MASKS = tuple(method_flag(DEFAULT_METHOD, "mask_names"))


def head_report(candidates, batch, head, choice, routed, decision, families=None) -> dict:
    """One head's dict of a VideoAttention report (the native keys). candidates: the
    layer's [(name, density)]; decision: None, or (index, MSE row, error, target met);
    families: {name: (family, rung, row order name)} of the candidates (the core's
    candidate_families() and candidate_run()'s order_name; a choice not in it is its own
    family, in the original order)."""
    mse = {} if decision is None else {name: float(x) for (name, _), x
                                       in zip(candidates, decision[1])}
    density = 1.0 if choice == "dense" else dict(candidates).get(choice, 0.0)
    family, rung, order = ("dense", 0.0, "original") if choice == "dense" else \
        (families or {}).get(choice, (choice, 0.0, "original"))
    spatial, temporal = _LEGACY_MSE_MASKS
    return {"batch": batch, "head": head, "choice": choice, "routed": routed,
            "family": family, "rung": rung, "order": order,
            "mse_spatial": mse.get(spatial) if routed else None,
            "mse_temporal": mse.get(temporal) if routed else None, "mse": mse,
            "error": None if decision is None else decision[2],
            "target_met": True if decision is None else decision[3],
            "density": density, "tiles_visited": 1.0, "seconds": 0.0, "permute_seconds": 0.0,
            "cluster_seconds": 0.0, "plan_seconds": 0.0, "compensated": False,
            "compensation_seconds": 0.0}


def call_report(report, heads_of, seconds, routed, candidates, granularity, families=None):
    """A call's report. heads_of, per batch entry: its head dicts (decided on the host),
    or for a routed call (batch, (index, met, errors, mse) on the device, the layer's
    RoutedLayer: visited pairs per candidate), read on first use (LazyReport)."""
    def heads():
        rows = []
        for entry in heads_of:
            if not routed:
                for h in entry:
                    h["seconds"] = seconds
                rows.extend(entry)
                continue
            b, (index, met, errors, mse), plan = entry
            index, met = index.tolist(), met.tolist()
            errors, mse = errors.double().tolist(), mse.double().tolist()
            for h, i in enumerate(index):
                info = head_report(candidates, b, h, candidates[i][0], True,
                                   (i, mse[h], errors[h][i], met[h]), families)
                info["tiles_visited"] = plan.visited[i]
                info["compensated"] = bool((getattr(plan, "compensated", None)
                                            or [False] * len(candidates))[i])  # the runner's
                if granularity == "tile":  # rounded masks' density: the pairs they keep
                    info["density"] = plan.visited[i] - plan.skipped[i]
                info["seconds"] = seconds
                rows.append(info)
        return rows

    if not routed:
        rows = heads()
        for name in ("permute_seconds", "cluster_seconds", "plan_seconds"):
            report[name] = sum(h[name] for h in rows)
        if not any(_on_device(value) for h in rows for value in h.values()):
            report["heads"] = rows
            return report
        # svg2's densities and compensation flags stay on the device until the
        # report is read (.item(): a float, or a bool for a flag).
        return LazyReport(report, lambda: [{key: value.item() if _on_device(value) else value
                                            for key, value in h.items()} for h in rows])
    return LazyReport(report, heads)


def _on_device(value) -> bool:
    """A tensor (a 0-d device value; this module imports no torch)."""
    return type(value).__name__ == "Tensor" or hasattr(value, "untyped_storage")
