"""Folding a handle's report into one row per denoising step."""

from __future__ import annotations

_SVG_CHOICES = ("dense", "spatial", "temporal")


def summarize(report: list[dict]) -> list[dict]:
    """One row per denoising step of a handle's report: how its heads ran.

    Each row: ``step``, ``calls`` (attention calls), ``dense`` / ``spatial`` /
    ``temporal`` (head counts over all calls; always present), one count per
    other choice that occurs (e.g. ``radial``, ``sta:3x3x3``, ``svg2``),
    ``density`` (mean over heads of the density each head ran with) and
    ``seconds`` (attention time).
    """
    rows: dict[int, dict] = {}
    for record in report:
        row = rows.setdefault(
            record["step"],
            {"step": record["step"], "calls": 0, "dense": 0, "spatial": 0, "temporal": 0, "density": 0.0, "seconds": 0.0},
        )
        row["calls"] += 1
        row["seconds"] += record["seconds"]
        for head in record["heads"]:
            row[head["choice"]] = row.get(head["choice"], 0) + 1
            row["density"] += head["density"]
    for row in rows.values():
        heads = sum(row[choice] for choice in _choices(row))
        row["density"] = row["density"] / heads if heads else 1.0
    return [rows[step] for step in sorted(rows)]


def _choices(row: dict) -> list[str]:
    """The head-count keys of a summarize() row: dense, spatial, temporal, then the others."""
    fixed = {"step", "calls", "density", "seconds"}
    return list(_SVG_CHOICES) + [key for key in row if key not in fixed and key not in _SVG_CHOICES]


def summary_table(report: list[dict]) -> str:
    """``summarize(report)`` as a text table, one line per step; a column per choice
    beyond dense, spatial and temporal that occurs."""
    rows = summarize(report)
    others = list(dict.fromkeys(key for row in rows for key in _choices(row)[len(_SVG_CHOICES):]))
    widths = [max(5, len(name)) for name in others]
    lines = ["step  calls  dense  spatial  temporal"
             + "".join(f"  {name:>{width}}" for name, width in zip(others, widths))
             + "  density  attention_ms"]
    for row in rows:
        lines.append(
            f"{row['step']:>4}  {row['calls']:>5}  {row['dense']:>5}  {row['spatial']:>7}  {row['temporal']:>8}"
            + "".join(f"  {row.get(name, 0):>{width}}" for name, width in zip(others, widths))
            + f"  {row['density']:>7.3f}  {1000 * row['seconds']:>12.1f}"
        )
    return "\n".join(lines)
