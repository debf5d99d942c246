#!/usr/bin/env python3
"""Table and plot of docs/masks.md from `tilesplash compare --json`.

    tilesplash compare --preset wan2.1-1.3b-480p --json > comparison.json
    scripts/masks_comparison.py comparison.json --table table.md --plot docs/masks-error.png \
        [--caption "how it was run"] [--check]

The table has one row per method and target density: the density each method
actually ran (mean over the heads), then per planted head type the relative L2
error of the output against dense and its cosine, then the kernel time per head
as a fraction of dense. The plot has one panel per planted type, error against
the density actually run, one line per method. --check compares the routed
mixture ("mix": spatial, temporal, radial and sta candidates) against the best
single family run at a density within the router's budget (1.25 x the target)
and lists every type and density where it does worse. Needs numpy and
matplotlib (any recent version).
"""

import argparse
import json
import sys
from collections import defaultdict

BUDGET_SLACK = 1.25  # tools/tilesplash/compare_command.cc, kBudgetSlack


def load(path):
    with open(path, encoding="utf-8") as stream:
        record = json.load(stream)
    rows = defaultdict(dict)  # (method, target) -> planted -> row
    for row in record["rows"]:
        rows[(row["method"], row["target_density"])][row["planted"]] = row
    planted = [row["planted"] for row in record["dense"]]
    methods = list(dict.fromkeys(row["method"] for row in record["rows"]))
    targets = sorted({row["target_density"] for row in record["rows"]})
    return record, rows, planted, methods, targets


def table(record, rows, planted, methods, targets):
    dense_ms = {row["planted"]: row["dense_ms"] for row in record["dense"]}
    head = ["method", "target", "density"] + planted + ["kernel / dense"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for method in methods:
        for target in targets:
            cells = rows.get((method, target))
            if not cells:
                continue
            densities = [cells[p]["density"] for p in planted]
            line = [method, f"{target:.2f}", f"{sum(densities) / len(densities):.3f}"]
            for p in planted:
                line.append(f"{cells[p]['rel_l2']:.3f} ({cells[p]['cosine']:.4f})")
            ratio = [cells[p]["kernel_ms"] / dense_ms[p] for p in planted]
            line.append(f"{sum(ratio) / len(ratio):.2f}")
            lines.append("| " + " | ".join(line) + " |")
    return "\n".join(lines) + "\n"


def single_families(record):
    """The methods that are one mask family (a SPEC term): what mix routes among.
    `tilesplash compare` writes them; for older files, the registry says."""
    if "families" in record:
        return record["families"]
    import tilesplash

    return [name for name, info in tilesplash.methods().items() if info["spec"]]


def check(record, rows, planted, targets):
    """Per type and target: mix's error against the best single family within the budget."""
    families = single_families(record)
    report, worse = [], []
    for target in targets:
        mix = rows.get(("mix", target))
        if not mix:
            continue
        for p in planted:
            best = None
            for family in families:
                row = rows.get((family, target), {}).get(p)
                if row and row["density"] <= BUDGET_SLACK * target * (1 + 1e-9):
                    if best is None or row["rel_l2"] < best[1]:
                        best = (family, row["rel_l2"])
            if best is None:
                continue
            got = mix[p]["rel_l2"]
            line = (f"{target:.2f} {p:<18} mix {got:.4f} ({mix[p]['choice']})"
                    f"  best single {best[1]:.4f} ({best[0]})")
            report.append(line)
            if got > best[1] * 1.001 + 1e-6:
                worse.append(line)
    return report, worse


def plot(rows, planted, methods, targets, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = 4
    panels = len(planted)
    grid_rows = (panels + columns - 1) // columns
    figure, axes = plt.subplots(grid_rows, columns, figsize=(4 * columns, 3.4 * grid_rows),
                                squeeze=False)
    markers = "osv^D<>p"
    for index, p in enumerate(planted):
        axis = axes[index // columns][index % columns]
        for m, method in enumerate(methods):
            points = sorted((rows[(method, t)][p]["density"], rows[(method, t)][p]["rel_l2"])
                            for t in targets if (method, t) in rows)
            if not points:
                continue
            axis.plot([x for x, _ in points], [max(y, 1e-5) for _, y in points],
                      marker=markers[m % len(markers)], label=method, linewidth=1.2, markersize=4)
        axis.set_title(p, fontsize=10)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlim(0.04, 1.0)
        axis.grid(True, which="both", alpha=0.3)
        axis.set_xlabel("density run", fontsize=8)
        axis.set_ylabel("relative L2 error vs dense", fontsize=8)
        axis.tick_params(labelsize=7)
    for index in range(panels, grid_rows * columns):
        axes[index // columns][index % columns].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    spare = axes[-1][-1] if panels < grid_rows * columns else None
    if spare is not None:
        spare.legend(handles, labels, loc="center", fontsize=9, title="method")
    else:
        figure.legend(handles, labels, loc="lower center", ncol=len(methods), fontsize=8)
    figure.suptitle(title, fontsize=11)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json", help="output of tilesplash compare --json")
    parser.add_argument("--table", help="write the markdown table here (default: stdout)")
    parser.add_argument("--plot", help="write the PNG plot here")
    parser.add_argument("--caption", help="a second line under the plot's title (e.g. the run's size)")
    parser.add_argument("--check", action="store_true",
                        help="compare mix with the best single family; exit 1 if it does worse")
    args = parser.parse_args()
    record, rows, planted, methods, targets = load(args.json)
    text = table(record, rows, planted, methods, targets)
    if args.table:
        with open(args.table, "w", encoding="utf-8") as stream:
            stream.write(text)
    else:
        sys.stdout.write(text)
    if args.plot:
        title = (f"{record.get('preset') or record['geometry']}: {record['tokens']} tokens, "
                 f"d = {record['head_dim']}, {record['dtype']}, tiles {record['block_q']} x "
                 f"{record['block_kv']}")
        if args.caption:
            title += "\n" + args.caption
        plot(rows, planted, methods, targets, args.plot, title)
    if args.check:
        report, worse = check(record, rows, planted, targets)
        print("\n".join(report))
        print(f"mix worse than the best single family in {len(worse)} of {len(report)} cases")
        for line in worse:
            print("  " + line)
        return 1 if worse else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
