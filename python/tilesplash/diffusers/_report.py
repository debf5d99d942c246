"""Folding a handle's report into one row per denoising step, and its picture (plot)."""

from __future__ import annotations

import numbers

from .._methods import DEFAULT_METHOD, methods

# The head counts every row has: dense and the default method's masks (svg's
# "spatial" and "temporal"), as the registry names them.
_FIXED_CHOICES = ("dense", *methods()[DEFAULT_METHOD]["mask_names"])


def summarize(report: list[dict]) -> list[dict]:
    """One row per denoising step of a handle's report: how its heads ran.

    Each row: ``step``, ``calls`` (attention calls), ``dense`` / ``spatial`` /
    ``temporal`` (head counts over all calls; always present), one count per
    other choice that occurs (e.g. ``radial``, ``sta:3x3x3``, ``svg2``),
    ``density`` (mean over heads of the density each head ran with),
    ``seconds`` (attention time), ``dense_seconds`` (an estimate of the same
    calls run dense: each head's time over the share of the map its kernel
    visited, "tiles_visited"), ``saved_seconds`` (dense_seconds - seconds) and
    ``target_missed`` (heads whose error target no candidate met) and
    ``families``: per mask family (the head report's ``family``: "spatial"
    for "spatial@0.05", "sta" for "sta:3x3x3", "dense"),
    ``{"heads", "density", "seconds", "saved_seconds"}`` with ``density`` the
    mean over that family's heads and the seconds summed as above.
    """
    rows: dict[int, dict] = {}
    for record in report:
        row = rows.setdefault(
            record["step"],
            {"step": record["step"], "calls": 0, **dict.fromkeys(_FIXED_CHOICES, 0), "density": 0.0,
             "seconds": 0.0, "dense_seconds": 0.0, "saved_seconds": 0.0, "target_missed": 0,
             "families": {}},
        )
        row["calls"] += 1
        row["seconds"] += record["seconds"]
        for head in record["heads"]:
            row[head["choice"]] = row.get(head["choice"], 0) + 1
            row["density"] += head["density"]
            visited = head.get("tiles_visited") or 1.0
            row["dense_seconds"] += head.get("seconds", 0.0) / max(visited, 1e-12)
            saved = head.get("seconds", 0.0) * (1.0 / max(visited, 1e-12) - 1.0)
            row["saved_seconds"] += saved
            row["target_missed"] += head.get("target_met", True) is False
            family = row["families"].setdefault(
                _family(head), {"heads": 0, "density": 0.0, "seconds": 0.0, "saved_seconds": 0.0})
            family["heads"] += 1
            family["density"] += head["density"]
            family["seconds"] += head.get("seconds", 0.0)
            family["saved_seconds"] += saved
    for row in rows.values():
        heads = sum(row[choice] for choice in _choices(row))
        row["density"] = row["density"] / heads if heads else 1.0
        row["families"] = {name: dict(f, density=f["density"] / f["heads"])
                           for name, f in sorted(row["families"].items())}
    return [rows[step] for step in sorted(rows)]


def _choices(row: dict) -> list[str]:
    """The head-count keys of a summarize() row: dense, spatial, temporal, then the others."""
    fixed = {"step", "calls", "density", "seconds", "dense_seconds", "saved_seconds",
             "target_missed", "families"}
    return list(_FIXED_CHOICES) + [key for key in row if key not in fixed and key not in _FIXED_CHOICES]


def summary_table(report: list[dict]) -> str:
    """``summarize(report)`` as a text table, one line per step; a column per choice
    beyond dense, spatial and temporal that occurs."""
    rows = summarize(report)
    others = list(dict.fromkeys(key for row in rows for key in _choices(row)[len(_FIXED_CHOICES):]))
    names = [*_FIXED_CHOICES, *others]
    widths = [max(5, len(name)) for name in names]
    lines = ["step  calls" + "".join(f"  {name:>{width}}" for name, width in zip(names, widths))
             + "  density  attention_ms  saved_ms"]
    for row in rows:
        lines.append(
            f"{row['step']:>4}  {row['calls']:>5}"
            + "".join(f"  {row.get(name, 0):>{width}}" for name, width in zip(names, widths))
            + f"  {row['density']:>7.3f}  {1000 * row['seconds']:>12.1f}"
            + f"  {1000 * row['saved_seconds']:>8.1f}"
        )
    return "\n".join(lines)


def _family(head: dict) -> str:
    """A head's mask family, the report's field ("spatial" for "spatial@0.05")."""
    return head["family"]


def _layer_labels(layers) -> list[str]:
    """The plot rows' names: each layer's index, after its transformer's name when the
    report holds several transformers ("transformer_2:3")."""
    several = len({transformer for transformer, _ in layers}) > 1
    return [f"{t}:{i}" if several else str(i) for t, i in layers]


def _grids(records, steps):
    """Per panel row (a step, or "mean" over all): (title, layers, density, error,
    family) arrays [layer, head], heads averaged over batch entries."""
    import numpy as np

    layers = list(dict.fromkeys((r.get("transformer", ""), r.get("layer", 0)) for r in records))
    heads = 1 + max((h["head"] for r in records for h in r["heads"]), default=0)
    families = sorted({_family(h) for r in records for h in r["heads"]})
    out = []
    for step in steps:
        chosen = [r for r in records if step == "mean" or r["step"] == step]
        sums = np.zeros((3, len(layers), heads))
        counts = np.zeros((len(layers), heads))
        votes = np.zeros((len(families), len(layers), heads))
        for r in chosen:
            row = layers.index((r.get("transformer", ""), r.get("layer", 0)))
            for h in r["heads"]:
                counts[row, h["head"]] += 1
                sums[0, row, h["head"]] += h["density"]
                error = h.get("error")
                sums[1, row, h["head"]] += np.nan if error is None else error
                votes[families.index(_family(h)), row, h["head"]] += 1
        with np.errstate(invalid="ignore", divide="ignore"):
            density, error = sums[0] / counts, sums[1] / counts
        family = np.where(counts > 0, votes.argmax(axis=0), -1)
        out.append((f"step {step}" if step != "mean" else "mean over steps", layers, density, error,
                    family))
    return out, families


def _check_steps(steps, known: list) -> list[int]:
    """plot()'s steps: a step number or a non-empty sequence of them, each in `known`."""
    if isinstance(steps, numbers.Integral) and not isinstance(steps, bool):
        steps = [steps]
    if isinstance(steps, (str, bytes)) or not hasattr(steps, "__iter__"):
        raise TypeError(f"steps: expected None, a step number or a list of them, got "
                        f"{type(steps).__name__}")
    steps = list(steps)
    if any(isinstance(s, bool) or not isinstance(s, numbers.Integral) for s in steps):
        raise TypeError(f"steps: expected step numbers (ints), got {steps}")
    steps = [int(s) for s in steps]
    missing = [s for s in steps if s not in known]
    if not steps or missing:
        raise ValueError(f"steps: expected steps of the report {known}, got {steps}")
    return steps


def plot(report: list[dict], path, steps=None) -> dict:
    """A picture of what every head chose: per requested step (``steps``: a list of
    step numbers; None: one row averaged over every step) three panels of layer x
    head: the density each head ran with, its mask family (the choice without its
    density, e.g. "spatial" for "spatial@0.05"), and its sampled error against dense
    (blank where not routed); one step number stands for a list of it. Writes a PNG
    to ``path``; needs matplotlib (``pip install 'tilesplash[plot]'``). Returns
    {"path", "panels", "steps"}."""
    records = list(report)
    if not records:
        raise ValueError("report: empty (run the pipeline with tilesplash enabled first)")
    known = sorted({r["step"] for r in records})
    steps = ["mean"] if steps is None else _check_steps(steps, known)
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.colors import ListedColormap
        from matplotlib.ticker import MaxNLocator
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError("tilesplash.diffusers.plot needs matplotlib: pip install matplotlib "
                          "(or tilesplash[plot])") from None
    grids, families = _grids(records, steps)
    figure = Figure(figsize=(13, 0.6 + 3.2 * len(grids)), dpi=80)
    FigureCanvasAgg(figure)
    axes = figure.subplots(len(grids), 3, squeeze=False)
    palette = ListedColormap(["#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377",
                              "#bbbbbb"][:max(1, len(families))])
    for row, (title, layers, density, error, family) in enumerate(grids):
        ax = axes[row]
        labels = _layer_labels(layers)
        image = ax[0].imshow(density, aspect="auto", vmin=0, vmax=1, cmap="viridis")
        figure.colorbar(image, ax=ax[0], label="density")
        import numpy as np

        shown = np.ma.masked_less(family, 0)
        image = ax[1].imshow(shown, aspect="auto", cmap=palette, vmin=-0.5,
                             vmax=len(families) - 0.5, interpolation="nearest")
        bar = figure.colorbar(image, ax=ax[1], ticks=range(len(families)))
        bar.ax.set_yticklabels(families)
        image = ax[2].imshow(error, aspect="auto", cmap="magma")
        figure.colorbar(image, ax=ax[2], label="sampled error")
        for a, name in zip(ax, ("density", "family", "sampled error")):
            a.set_title(f"{title}: {name}", fontsize=9)
            a.set_xlabel("head")
            a.set_ylabel("layer")
            shown_rows = range(0, len(layers), max(1, len(layers) // 10))  # whole layers only
            a.set_yticks(list(shown_rows), labels=[labels[i] for i in shown_rows])
            a.xaxis.set_major_locator(MaxNLocator(integer=True))
    figure.tight_layout()
    figure.savefig(path, format="png")
    return {"path": path, "panels": 3 * len(grids), "steps": steps}
