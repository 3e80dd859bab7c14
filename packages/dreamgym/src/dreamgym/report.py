"""The main job's report: ``report.json``, ``report.md`` and ``training_curve.png``.

``report.json`` is machine-readable:

- ``policies``: ``random``, ``before_rl``, ``dreamgym`` → ``{success_rate, ci95_low, ci95_high,
  mean_reward, episodes, ...}`` on the same held-out real games;
- ``real_interactions_rl``: real environment steps taken during RL (0 for DreamGym);
- ``real_interactions``: real steps spent on seed data, fidelity measurement and evaluation;
- ``experience_model``: fidelity on held-out real transitions and the SFT summary;
- ``comparison``: whether DreamGym beats the policy before RL with non-overlapping 95% intervals;
- ``environment``, ``seconds``, ``phase_seconds``, ``config``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dreamgym.stats import intervals_overlap

__all__ = ["comparison", "write_report"]


def comparison(policies: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """DreamGym vs before-RL (and vs random): difference and interval overlap."""
    out: dict[str, Any] = {}
    for base in ("before_rl", "random"):
        if base in policies and "dreamgym" in policies:
            a, b = policies["dreamgym"], policies[base]
            overlap = intervals_overlap(
                (a["ci95_low"], a["ci95_high"]), (b["ci95_low"], b["ci95_high"])
            )
            out[f"dreamgym_vs_{base}"] = {
                "success_rate_difference": a["success_rate"] - b["success_rate"],
                "intervals_overlap": overlap,
                "dreamgym_better_non_overlapping": (
                    not overlap and a["success_rate"] > b["success_rate"]
                ),
            }
    return out


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _markdown(report: dict[str, Any]) -> str:
    p, em = report["policies"], report.get("experience_model", {})
    fid = em.get("fidelity", {})
    lines = [
        f"# DreamGym report — {report['environment']}",
        "",
        f"Wall time: {report['seconds']:.0f} s. Real environment steps during RL: "
        f"**{report['real_interactions_rl']}**.",
        "",
        "## Policies on the same held-out real games",
        "",
        "| policy | success rate | 95% CI | mean reward | episodes |",
        "|---|---|---|---|---|",
    ]
    names = {"random": "random", "before_rl": "before RL", "dreamgym": "DreamGym (0 real RL steps)"}
    for key, label in names.items():
        if key in p:
            r = p[key]
            lines.append(
                f"| {label} | {_pct(r['success_rate'])} | [{_pct(r['ci95_low'])}, "
                f"{_pct(r['ci95_high'])}] | {r['mean_reward']:.3f} | {r['episodes']} |"
            )
    cmp_ = report.get("comparison", {}).get("dreamgym_vs_before_rl")
    if cmp_:
        verdict = "beats" if cmp_["dreamgym_better_non_overlapping"] else "does not beat"
        lines += [
            "",
            f"DreamGym **{verdict}** the policy before RL with non-overlapping 95% "
            f"intervals (difference {100 * cmp_['success_rate_difference']:+.1f} points).",
        ]
    lines += [
        "",
        "## Experience model on held-out real transitions",
        "",
        "| metric | value |",
        "|---|---|",
    ]
    for key in (
        "reward_accuracy",
        "success_reward_recall",
        "termination_accuracy",
        "next_observation_exact_match",
        "admissible_actions_exact_match",
        "parse_failure_rate",
        "transitions",
    ):
        if key in fid:
            v = fid[key]
            lines.append(f"| {key} | {v if isinstance(v, int) or v is None else f'{v:.3f}'} |")
    lines += ["", "## Real environment interactions", ""]
    for key, value in report.get("real_interactions", {}).items():
        lines.append(f"- {key}: {value}")
    lines += ["", "## Phases (seconds)", ""]
    for key, value in report.get("phase_seconds", {}).items():
        lines.append(f"- {key}: {value:.1f}")
    lines += ["", "![training curve](training_curve.png)", ""]
    return "\n".join(lines)


def _plot(curve: list[dict[str, Any]], policies: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    fig, ax = plt.subplots(figsize=(7, 4))
    xs = [row["iteration"] + 1 for row in curve]
    ax.plot(
        xs,
        [row["rollout/success_rate"] for row in curve],
        marker="o",
        label="imagined success (training rollouts)",
    )
    colors = {"random": "gray", "before_rl": "tab:orange", "dreamgym": "tab:green"}
    for key, color in colors.items():
        if key in policies:
            r = policies[key]
            ax.axhline(
                r["success_rate"],
                color=color,
                linestyle="--",
                label=f"real held-out: {key} ({100 * r['success_rate']:.0f}%)",
            )
            ax.axhspan(r["ci95_low"], r["ci95_high"], color=color, alpha=0.1)
    ax.set_xlabel("GRPO iteration (imagined environment)")
    ax.set_ylabel("success rate")
    ax.set_ylim(0, 1)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("DreamGym training curve")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(
    report: dict[str, Any], curve: list[dict[str, Any]], out_dir: Path
) -> dict[str, Path]:
    """Write the three report files; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {**report, "comparison": comparison(report["policies"])}
    paths = {
        "json": out_dir / "report.json",
        "md": out_dir / "report.md",
        "png": out_dir / "training_curve.png",
    }
    paths["json"].write_text(json.dumps({**report, "training_curve": curve}, indent=2))
    paths["md"].write_text(_markdown(report))
    _plot(curve, report["policies"], paths["png"])
    return paths
