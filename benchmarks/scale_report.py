"""The table and the plot of ``benchmarks/scale.py``: made from every row of its
``results.jsonl``, so sizes can be run one at a time."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def table(rows: list[dict[str, Any]]) -> str:
    cols = [("store", "store", "{}"), ("trials", "trials", "{:,}"),
            ("driver_s_per_trial", "driver s/trial", "{:.3f}"),
            ("cpu_s_per_trial", "driver CPU s/trial", "{:.3f}"),
            ("peak_mb", "driver peak MB", "{:.0f}"), ("writes_per_s", "MLflow writes/s", "{:.0f}"),
            ("store_mb", "store MB", "{:.1f}"), ("analysed", "runs analysed", "{:,}"),
            ("analyze_s", "analyze s", "{:.1f}"),
            ("analyze_mb", "analyze MB", "{:.0f}"), ("export_s", "export s", "{:.1f}"),
            ("export_mb", "export MB", "{:.0f}"), ("replay_s", "replay s", "{:.1f}"),
            ("replay_mb", "replay MB", "{:.0f}"), ("runs_page_s", "runs link s", "{:.2f}"),
            ("runs_all_s", "all runs s", "{:.2f}")]
    lines = ["| " + " | ".join(h for _, h, _ in cols) + " |",
             "|" + " --- |" * len(cols)]
    for r in sorted(rows, key=lambda r: (r["store"], r["trials"], r.get("amplified_to", 0))):
        r = {**r, "analysed": r.get("amplified_to", r["trials"])}
        lines.append("| " + " | ".join(f.format(r[k]) if k in r else "-" for k, _, f in cols)
                     + " |")
    return "\n".join(lines)


def plot(rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [("wall_s", "sweep (driver wall)"), ("analyze_s", "analyze --history"),
            ("export_s", "export"), ("replay_s", "replay"), ("runs_all_s", "REST: all runs")]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for store, style in (("sqlite", "-o"), ("postgresql", "--s")):
        mine = [r for r in rows if r["store"] == store]
        for i, (key, label) in enumerate(keys):
            x = "trials" if key == "wall_s" else "analysed"  # the store's runs, amplified
            points = sorted((r.get("amplified_to", r["trials"]) if x == "analysed"
                             else r["trials"], r[key]) for r in mine)
            if points:
                ax.plot(*zip(*points, strict=True), style, color=f"C{i}",
                        label=f"{label}, {store}")
    ax.set(xscale="log", yscale="log", xlabel="trials", ylabel="seconds",
           title="cost against trial runs (benchmarks/scale.py)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
