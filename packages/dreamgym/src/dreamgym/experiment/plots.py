"""Experiment plots (matplotlib, Agg): success vs real interactions, and training curves.

- ``success_vs_real_<env>.png``: one point per row at (real interactions used, pooled success
  rate) with its 95% interval as an error bar, per-seed rates as faint dots; the x axis is
  symlog so 0-real rows (DreamGym) sit at the left edge.
- ``training_curves_<env>.png``: one panel per trained row: the training-rollout success rate per
  iteration (imagined for DreamGym rows, real for real-environment rows), one line per seed and
  their mean; the SFT row shows its action NLL per epoch instead.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["plot_success_vs_real", "plot_training_curves"]


def _pyplot() -> Any:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    return plt


def plot_success_vs_real(
    environment: str,
    cells: Mapping[str, Mapping[str, Any]],
    labels: Mapping[str, str],
    path: Path,
) -> Path:
    """Write the success-vs-real-interactions plot of one environment; returns ``path``."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    for i, (key, cell) in enumerate((k, c) for k, c in cells.items() if c.get("status") == "ok"):
        color = f"C{i % 10}"
        p, x = cell["pooled"], float(cell["real_interactions"]["mean"])
        ax.errorbar(
            [x],
            [p["success_rate"]],
            yerr=[[p["success_rate"] - p["ci95_low"]], [p["ci95_high"] - p["success_rate"]]],
            fmt="o",
            color=color,
            capsize=4,
            label=f"{labels.get(key, key)} ({100 * p['success_rate']:.0f}%)",
        )
        seeds = cell["per_seed"]
        ax.scatter(
            [s["real_interactions"] for s in seeds],
            [s["success_rate"] for s in seeds],
            color=color,
            alpha=0.3,
            s=12,
        )
    ax.set_xscale("symlog", linthresh=10)
    ax.set_xlabel("real environment interactions used for policy training (symlog)")
    ax.set_ylabel("success rate on held-out real games")
    ax.set_ylim(0, 1)
    ax.set_title(f"{environment}: success vs real interactions (95% CI, dots = seeds)")
    ax.legend(loc="best", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def plot_training_curves(
    environment: str,
    curves: Mapping[str, Mapping[str, Sequence[Mapping[str, Any]]]],
    labels: Mapping[str, str],
    path: Path,
) -> Path:
    """Write one environment's training curves (``curves[row][seed]`` = metric rows)."""
    plt = _pyplot()
    keys = [k for k, by_seed in curves.items() if any(by_seed.values())]
    cols = 3
    nrows = max(1, math.ceil(len(keys) / cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 3 * nrows), squeeze=False)
    for ax in axes.flat[len(keys) :]:
        ax.axis("off")
    for ax, key in zip(axes.flat, keys, strict=False):
        metric = "success_rate"
        if all(r.get("success_rate") is None for rows in curves[key].values() for r in rows):
            metric = "bc_nll"
        series = []
        for seed, rows in sorted(curves[key].items()):
            xs = [r["iteration"] + 1 for r in rows if r.get(metric) is not None]
            ys = [r[metric] for r in rows if r.get(metric) is not None]
            if xs:
                ax.plot(xs, ys, alpha=0.35, marker=".", label=f"seed {seed}")
                series.append(dict(zip(xs, ys, strict=True)))
        common = sorted(set.intersection(*(set(s) for s in series))) if series else []
        if common:
            ax.plot(
                common,
                [sum(s[x] for s in series) / len(series) for x in common],
                color="black",
                linewidth=2,
                marker="o",
                label="mean",
            )
        ax.set_title(labels.get(key, key), fontsize=9)
        ax.set_xlabel("iteration" if metric == "success_rate" else "epoch")
        ax.set_ylabel("rollout success" if metric == "success_rate" else "action NLL")
        if metric == "success_rate":
            ax.set_ylim(0, 1)
        ax.legend(fontsize=6)
    fig.suptitle(f"{environment}: training curves")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
