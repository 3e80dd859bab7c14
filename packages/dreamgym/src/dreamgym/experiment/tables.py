"""Pure aggregation of experiment cells and the markdown tables (no I/O, no services).

A *cell* is one (row, environment) pair played with every seed. Its inputs are per-seed
outcomes::

    {"seed": 0, "success_rate": 0.5, "episodes": 20, "mean_reward": 0.5,
     "real_interactions": 120, "train_usage": {"wall_s", "cpu_s", "gpu_s"}, "services_cpu_s": 3.0,
     "eval_usage": {"wall_s", "cpu_s"}}

and :func:`aggregate_cell` turns them into

- ``pooled``: successes and episodes summed over seeds, the success rate and its Wilson 95%
  interval (episodes of different seeds are pooled as independent Bernoulli trials), and the
  episode-weighted mean reward;
- ``seed_mean`` / ``seed_std``: the mean and sample standard deviation (ddof = 1) of the
  per-seed success rates (between-seed spread, which the pooled interval does not show);
- ``per_seed``: each seed's own success rate with its Wilson interval;
- ``real_interactions``: mean / min / max over seeds of the measured real interactions;
- ``cost``: mean per seed of training wall-clock, CPU (job + services) and GPU seconds, and of
  evaluation wall-clock and CPU seconds.

A row that cannot run is a cell ``{"status": "n/a", "reason": ...}``; one whose job failed is
``{"status": "failed", "reason": ...}``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from dreamgym.stats import intervals_overlap, wilson_interval

__all__ = [
    "aggregate_cell",
    "check_claims",
    "markdown_report",
    "na_cell",
    "successes_of",
]


def successes_of(success_rate: float, episodes: int) -> int:
    """The number of won episodes behind a success rate (``round(rate · episodes)``).

    Raises:
        ValueError: the rate is not k / episodes for an integer k (off by more than 1e-6).
    """
    k = round(success_rate * episodes)
    if episodes < 0 or not 0 <= k <= episodes or abs(k - success_rate * episodes) > 1e-6:
        raise ValueError(f"success_rate {success_rate} is not k/{episodes} for an integer k")
    return int(k)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _std(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = sum(values) / len(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def _usage_mean(per_seed: Sequence[Mapping[str, Any]], key: str, field: str) -> float | None:
    values = [
        float(s[key][field])
        for s in per_seed
        if isinstance(s.get(key), Mapping) and s[key].get(field) is not None
    ]
    return _mean(values)


def na_cell(reason: str) -> dict[str, Any]:
    """A cell that was not run, with the reason shown in the tables."""
    return {"status": "n/a", "reason": reason}


def aggregate_cell(per_seed: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Pool one cell's per-seed outcomes (see the module doc for shapes).

    Raises:
        ValueError: no seeds, or a seed without episodes.
    """
    if not per_seed:
        raise ValueError("a cell needs at least one seed")
    seeds_out, rates, wins_total, episodes_total, reward_sum = [], [], 0, 0, 0.0
    for s in per_seed:
        n = int(s["episodes"])
        if n < 1:
            raise ValueError(f"seed {s.get('seed')} has no evaluation episodes")
        wins = successes_of(float(s["success_rate"]), n)
        low, high = wilson_interval(wins, n)
        rates.append(wins / n)
        wins_total, episodes_total = wins_total + wins, episodes_total + n
        reward_sum += float(s["mean_reward"]) * n
        seeds_out.append(
            {
                "seed": s["seed"],
                "successes": wins,
                "episodes": n,
                "success_rate": wins / n,
                "ci95_low": low,
                "ci95_high": high,
                "mean_reward": float(s["mean_reward"]),
                "real_interactions": int(s.get("real_interactions", 0)),
            }
        )
    low, high = wilson_interval(wins_total, episodes_total)
    real = [int(s.get("real_interactions", 0)) for s in per_seed]
    services = [float(s["services_cpu_s"]) for s in per_seed if s.get("services_cpu_s") is not None]
    train_cpu = _usage_mean(per_seed, "train_usage", "cpu_s")
    return {
        "status": "ok",
        "pooled": {
            "successes": wins_total,
            "episodes": episodes_total,
            "success_rate": wins_total / episodes_total,
            "ci95_low": low,
            "ci95_high": high,
            "mean_reward": reward_sum / episodes_total,
        },
        "seed_mean": sum(rates) / len(rates),
        "seed_std": _std(rates),
        "per_seed": seeds_out,
        "real_interactions": {
            "mean": sum(real) / len(real),
            "min": min(real),
            "max": max(real),
            "per_seed": real,
        },
        "cost": {
            "train_wall_s": _usage_mean(per_seed, "train_usage", "wall_s"),
            "train_cpu_s": train_cpu,
            "services_cpu_s": _mean(services),
            "total_cpu_s": None if train_cpu is None else train_cpu + (_mean(services) or 0.0),
            "gpu_s": _usage_mean(per_seed, "train_usage", "gpu_s"),
            "eval_wall_s": _usage_mean(per_seed, "eval_usage", "wall_s"),
            "eval_cpu_s": _usage_mean(per_seed, "eval_usage", "cpu_s"),
        },
    }


def _interval(cell: Mapping[str, Any]) -> tuple[float, float]:
    p = cell["pooled"]
    return float(p["ci95_low"]), float(p["ci95_high"])


def _compare(
    cells: Mapping[str, Mapping[str, Any]], candidate: str, reference: str
) -> dict[str, Any] | None:
    a, b = cells.get(candidate), cells.get(reference)
    if not a or not b or a.get("status") != "ok" or b.get("status") != "ok":
        return None
    pa, pb = a["pooled"]["success_rate"], b["pooled"]["success_rate"]
    ra, rb = a["real_interactions"]["max"], b["real_interactions"]["max"]
    return {
        "candidate": candidate,
        "reference": reference,
        "candidate_success": pa,
        "reference_success": pb,
        "difference": pa - pb,
        "intervals_overlap": intervals_overlap(_interval(a), _interval(b)),
        "reference_inside_candidate_interval": _interval(a)[0] <= pb <= _interval(a)[1],
        "candidate_real_interactions": ra,
        "reference_real_interactions": rb,
        "real_interaction_ratio": (ra / rb) if rb else None,
    }


def check_claims(cells: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The paper's headline claims, checked on one environment's cells.

    - ``s2r_vs_real`` (GRPO, and ``ppo_s2r_vs_real`` for PPO): DreamGym-S2R with at most 10% of
      the real interactions *matches or beats* real-environment RL with the full budget. Holds
      when the real-interaction ratio (max over seeds) is <= 0.1 and S2R's pooled success rate
      is >= the real row's, or the two 95% intervals overlap (not shown worse).
    - ``dreamgym_vs_real`` (and ``ppo_dreamgym_vs_real``): DreamGym with zero real
      interactions comes *within the confidence interval* of real-environment RL: the real
      row's success rate lies inside DreamGym's pooled 95% interval, or it does better.

    Returns:
        Claim name → comparison dict with ``holds`` (bool) and ``why`` (a sentence), or
        ``None`` when a needed row is missing or n/a.
    """
    out: dict[str, Any] = {}
    pairs = {
        "s2r_vs_real": ("dreamgym_s2r", "real_grpo", "s2r"),
        "ppo_s2r_vs_real": ("dreamgym_ppo_s2r", "real_ppo", "s2r"),
        "dreamgym_vs_real": ("dreamgym", "real_grpo", "zero"),
        "ppo_dreamgym_vs_real": ("dreamgym_ppo", "real_ppo", "zero"),
    }
    for name, (candidate, reference, kind) in pairs.items():
        c = _compare(cells, candidate, reference)
        if c is None:
            out[name] = None
            continue
        ratio = c["real_interaction_ratio"]
        budget_ok = ratio is not None and ratio <= 0.1 + 1e-12
        at_least = c["difference"] >= 0
        if kind == "s2r":
            holds = budget_ok and (at_least or c["intervals_overlap"])
            why = (
                f"{100 * c['candidate_success']:.1f}% with {c['candidate_real_interactions']} "
                f"real steps vs {100 * c['reference_success']:.1f}% with "
                f"{c['reference_real_interactions']} (ratio "
                f"{'n/a' if ratio is None else f'{ratio:.3f}'}); "
                + ("higher or equal" if at_least else "lower")
                + (", intervals overlap" if c["intervals_overlap"] else ", intervals disjoint")
            )
        else:
            holds = c["candidate_real_interactions"] == 0 and (
                at_least or c["reference_inside_candidate_interval"]
            )
            why = (
                f"{100 * c['candidate_success']:.1f}% with "
                f"{c['candidate_real_interactions']} real steps vs "
                f"{100 * c['reference_success']:.1f}%; the real row's rate is "
                + ("inside" if c["reference_inside_candidate_interval"] else "outside")
                + " DreamGym's 95% interval"
            )
        out[name] = {**c, "holds": bool(holds), "why": why}
    return out


# -- markdown -------------------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def _secs(x: float | None) -> str:
    return "–" if x is None else f"{x:.0f}"


def _success_cell(cell: Mapping[str, Any] | None) -> str:
    if not cell:
        return "–"
    if cell.get("status") != "ok":
        return "failed" if cell.get("status") == "failed" else "n/a"
    p = cell["pooled"]
    return (
        f"{_pct(p['success_rate'])} [{_pct(p['ci95_low'])}, {_pct(p['ci95_high'])}] "
        f"(±{_pct(cell['seed_std'])})"
    )


def _real_cell(cell: Mapping[str, Any] | None) -> str:
    if not cell or cell.get("status") != "ok":
        return "–"
    r = cell["real_interactions"]
    return str(r["max"]) if r["min"] == r["max"] else f"{r['min']}–{r['max']}"


def _table(
    title: str,
    keys: Sequence[str],
    result: Mapping[str, Any],
) -> list[str]:
    envs = list(result["environments"])
    labels = {r["key"]: r["label"] for r in result["rows"]}
    head = ["Method"] + [h for e in envs for h in (f"{e} success % [95% CI] (±sd)", "real")]
    lines = [f"### {title}", "", "| " + " | ".join(head) + " |"]
    lines.append("|" + "---|" * len(head))
    for key in keys:
        row = [labels.get(key, key)]
        for env in envs:
            cell = result["cells"].get(env, {}).get(key)
            row += [_success_cell(cell), _real_cell(cell)]
        lines.append("| " + " | ".join(row) + " |")
    return [*lines, ""]


_JUDGE_CRITERIA = {
    "causal_consistency": "causal consistency",
    "diversity": "diversity",
    "informativeness": "informativeness",
    "hallucination": "hallucination & failure feedback",
}


def _judge_line(judge: Mapping[str, Any]) -> str:
    """One line of the LLM-judge rubric means (0–2, higher is better) of a ``fidelity`` job."""
    means = judge.get("means") or {}
    scores = [
        f"{label} {means[key]:.2f}"
        for key, label in _JUDGE_CRITERIA.items()
        if isinstance(means.get(key), int | float)
    ]
    counts = (
        f"{judge.get('judged', 0)} of {judge.get('sampled', 0)} sampled transitions judged, "
        f"{judge.get('parse_failures', 0)} unparseable replies"
    )
    if judge.get("error"):
        counts += f"; stopped: {str(judge['error'])[:120]}"
    body = ", ".join(scores) if scores else "no transition judged"
    return f"LLM judge ({judge.get('model', '?')}, 0–2, higher is better): {body} ({counts})."


def markdown_report(result: Mapping[str, Any]) -> str:
    """``experiment.md``: Table 1/2 layout, per-seed rates, costs, claims, n/a reasons, notes.

    ``result`` is the ``experiment.json`` object (keys ``preset``, ``environments``, ``seeds``,
    ``rows``, ``cells``, ``claims``, ``shared``, ``seconds``, ``notes``).
    """
    rows = [r["key"] for r in result["rows"]]
    main = [k for k in rows if next(r for r in result["rows"] if r["key"] == k)["table"] == "main"]
    ablation = [k for k in rows if k not in main]
    envs = list(result["environments"])
    lines = [
        f"# DreamGym experiment — preset `{result['preset']}`",
        "",
        f"Environments: {', '.join(envs)}. Seeds: {', '.join(map(str, result['seeds']))}. "
        f"Wall time: {result.get('seconds', 0):.0f} s.",
        "",
        "Success rate (%) on held-out real games, pooled over seeds, with its Wilson 95% "
        "interval and (±) the standard deviation of the per-seed rates; *real* = real "
        "environment interactions the row used for policy training (measured: real RL steps, "
        "or expert transitions trained on for SFT; max over seeds, a range when seeds differ).",
        "",
    ]
    lines += _table("Table 1 — methods", main, result)
    if ablation:
        full = ["dreamgym"] if "dreamgym" in rows else []
        lines += _table("Table 2 — ablations of DreamGym (GRPO)", full + ablation, result)
    lines += ["### Per-seed success rates (%)", "", "| Method | " + " | ".join(envs) + " |"]
    lines.append("|" + "---|" * (len(envs) + 1))
    labels = {r["key"]: r["label"] for r in result["rows"]}
    for key in rows:
        row = [labels[key]]
        for env in envs:
            cell = result["cells"].get(env, {}).get(key) or {}
            row.append(
                ", ".join(f"s{s['seed']}: {_pct(s['success_rate'])}" for s in cell["per_seed"])
                if cell.get("status") == "ok"
                else "n/a"
            )
        lines.append("| " + " | ".join(row) + " |")
    lines += [
        "",
        "### Cost per row (mean per seed, seconds)",
        "",
        "Training = the job(s) that produced the row's policy (the RL or BC job; the shared "
        "seed data and experience-model SFT are listed below); CPU = the job process and its "
        "children plus the services' processes while it ran; GPU = wall time holding a CUDA "
        "context.",
        "",
        "| Method | environment | train wall | train CPU (job + services) | GPU | eval wall |"
        " eval CPU |",
        "|---|---|---|---|---|---|---|",
    ]
    for key in rows:
        for env in envs:
            cell = result["cells"].get(env, {}).get(key) or {}
            if cell.get("status") != "ok":
                continue
            c = cell["cost"]
            lines.append(
                f"| {labels[key]} | {env} | {_secs(c['train_wall_s'])} | "
                f"{_secs(c['total_cpu_s'])} ({_secs(c['train_cpu_s'])} + "
                f"{_secs(c['services_cpu_s'])}) | {_secs(c['gpu_s'])} | "
                f"{_secs(c['eval_wall_s'])} | {_secs(c['eval_cpu_s'])} |"
            )
    lines += [
        "",
        "### Claims",
        "",
        "*Matches* means not shown worse: S2R's rate is at least the real row's or the 95% "
        "intervals overlap. Overlapping intervals say the data cannot tell the rows apart, not "
        "that they are equal; with few held-out episodes the intervals are wide.",
        "",
    ]
    names = {
        "s2r_vs_real": "DreamGym-S2R (GRPO, ≤10% real) matches or beats GRPO (real env)",
        "ppo_s2r_vs_real": "DreamGym-S2R (PPO, ≤10% real) matches or beats PPO (real env)",
        "dreamgym_vs_real": "DreamGym (GRPO, 0 real) within the CI of GRPO (real env)",
        "ppo_dreamgym_vs_real": "DreamGym (PPO, 0 real) within the CI of PPO (real env)",
    }
    for env in envs:
        for name, text in names.items():
            claim = (result.get("claims", {}).get(env) or {}).get(name)
            if claim is None:
                continue
            verdict = "holds" if claim["holds"] else "does not hold"
            lines.append(f"- {env}: {text} — **{verdict}**: {claim['why']}.")
    not_run = [
        (env, key, cell.get("status"), cell.get("reason", ""))
        for env in envs
        for key, cell in result["cells"].get(env, {}).items()
        if cell.get("status") != "ok"
    ]
    if not_run:
        lines += ["", "### Rows not run (n/a) or failed", ""]
        lines += [f"- {labels.get(k, k)} on {e} ({status}): {why}" for e, k, status, why in not_run]
    lines += ["", "### Shared per environment", ""]
    for env in envs:
        shared = result.get("shared", {}).get(env, {})
        collect = shared.get("collect", {})
        fidelity = shared.get("fidelity") or {}
        lines.append(
            f"- {env}: seed data {collect.get('trajectories', '–')} real trajectories / "
            f"{collect.get('real_steps', '–')} real steps (used by every DreamGym row's "
            "experience model; not counted in *real* above, as in the paper); experience "
            "model SFT "
            f"{_secs((shared.get('experience_model_usage') or {}).get('wall_s'))} s wall."
        )
        if fidelity:
            keys = ("reward_accuracy", "termination_accuracy", "next_observation_exact_match")
            parts = [f"{k} {fidelity[k]:.3f}" for k in keys if fidelity.get(k) is not None]
            lines.append(f"  Experience model on held-out real transitions: {', '.join(parts)}.")
        if isinstance(fidelity.get("judge"), dict):
            lines.append(f"  {_judge_line(fidelity['judge'])}")
    for note in result.get("notes", []):
        lines.append(f"- {note}")
    lines += ["", "### Plots", ""]
    for env in envs:
        lines += [
            f"![success vs real interactions, {env}](success_vs_real_{env}.png)",
            f"![training curves, {env}](training_curves_{env}.png)",
        ]
    return "\n".join(lines) + "\n"
