"""Pure aggregation of experiment cells, the claims and the markdown report (hand-computed)."""

from __future__ import annotations

import pytest

from dreamgym.experiment.tables import (
    aggregate_cell,
    check_claims,
    markdown_report,
    na_cell,
    successes_of,
)


def seed(s: int, wins: int, n: int, reward: float | None = None, real: int = 0, **extra):
    return {
        "seed": s,
        "success_rate": wins / n,
        "episodes": n,
        "mean_reward": wins / n if reward is None else reward,
        "real_interactions": real,
        **extra,
    }


def cell(*wins_n_real):
    return aggregate_cell([seed(i, w, n, real=r) for i, (w, n, r) in enumerate(wins_n_real)])


# -- successes_of ---------------------------------------------------------------------------------


def test_successes_of_recovers_the_count_behind_a_rate():
    assert successes_of(0.3, 10) == 3
    assert successes_of(2 / 3, 6) == 4
    assert successes_of(0.0, 5) == 0


def test_successes_of_rejects_a_rate_that_is_not_k_over_n():
    with pytest.raises(ValueError, match="not k/10"):
        successes_of(0.35, 10)


# -- aggregate_cell -------------------------------------------------------------------------------


def test_aggregate_pools_seeds_into_one_wilson_interval():
    # 3/10, 5/10, 7/10 -> 15/30; Wilson(15, 30): center 0.5, half-width
    # 1.959964 * sqrt(0.25/30 + 3.841459/3600) / (1 + 3.841459/30) = 0.168458
    out = aggregate_cell([seed(0, 3, 10), seed(1, 5, 10), seed(2, 7, 10)])

    pooled = out["pooled"]
    assert (pooled["successes"], pooled["episodes"]) == (15, 30)
    assert pooled["success_rate"] == 0.5
    assert pooled["ci95_low"] == pytest.approx(0.331542, abs=1e-5)
    assert pooled["ci95_high"] == pytest.approx(0.668458, abs=1e-5)
    assert out["seed_mean"] == pytest.approx(0.5)
    assert out["seed_std"] == pytest.approx(0.2)  # sqrt((0.04 + 0 + 0.04) / 2)
    assert pooled["mean_reward"] == pytest.approx(0.5)


def test_aggregate_weights_seeds_by_their_episodes():
    # 1/4 and 4/6 -> pooled 5/10 = 0.5, but the mean of seed rates is (0.25 + 0.6667) / 2
    out = aggregate_cell([seed(0, 1, 4, reward=0.25), seed(1, 4, 6, reward=2 / 3)])

    assert out["pooled"]["success_rate"] == 0.5
    assert out["seed_mean"] == pytest.approx(0.458333, abs=1e-6)
    assert out["pooled"]["mean_reward"] == pytest.approx((0.25 * 4 + 4) / 10)


def test_aggregate_keeps_per_seed_intervals_real_interactions_and_costs():
    seeds = [
        seed(0, 0, 5, real=40, train_usage={"wall_s": 10, "cpu_s": 8, "gpu_s": None},
             services_cpu_s=2.0, eval_usage={"wall_s": 3, "cpu_s": 1}),
        seed(1, 5, 5, real=36, train_usage={"wall_s": 30, "cpu_s": 12, "gpu_s": None},
             services_cpu_s=4.0, eval_usage={"wall_s": 5, "cpu_s": 3}),
    ]  # fmt: skip

    out = aggregate_cell(seeds)

    first, second = out["per_seed"]
    assert (first["ci95_low"], second["ci95_high"]) == (0.0, 1.0)  # exact at 0/n and n/n
    assert out["real_interactions"] == {"mean": 38, "min": 36, "max": 40, "per_seed": [40, 36]}
    assert out["cost"] == {
        "train_wall_s": 20,
        "train_cpu_s": 10,
        "services_cpu_s": 3.0,
        "total_cpu_s": 13.0,
        "gpu_s": None,
        "eval_wall_s": 4,
        "eval_cpu_s": 2,
    }


def test_aggregate_without_usage_has_empty_costs():
    out = aggregate_cell([seed(0, 1, 2)])

    assert set(out["cost"].values()) == {None}


@pytest.mark.parametrize("bad", [[], [seed(0, 0, 1) | {"episodes": 0, "success_rate": 0.0}]])
def test_aggregate_rejects_cells_without_episodes(bad):
    with pytest.raises(ValueError):
        aggregate_cell(bad)


# -- claims ---------------------------------------------------------------------------------------


def test_s2r_claim_holds_with_a_tenth_of_the_budget_and_a_higher_rate():
    claims = check_claims({"dreamgym_s2r": cell((8, 10, 4)), "real_grpo": cell((5, 10, 40))})

    c = claims["s2r_vs_real"]
    assert c["holds"] and c["real_interaction_ratio"] == pytest.approx(0.1)
    assert c["difference"] == pytest.approx(0.3)
    assert claims["ppo_s2r_vs_real"] is None  # rows absent


def test_s2r_claim_fails_above_ten_percent_of_the_real_interactions():
    claims = check_claims({"dreamgym_s2r": cell((8, 10, 5)), "real_grpo": cell((5, 10, 40))})

    assert not claims["s2r_vs_real"]["holds"]  # ratio 0.125


def test_s2r_claim_lower_but_overlapping_intervals_counts_as_matching():
    claims = check_claims({"dreamgym_s2r": cell((4, 10, 4)), "real_grpo": cell((5, 10, 40))})

    c = claims["s2r_vs_real"]
    assert c["holds"] and c["intervals_overlap"] and c["difference"] < 0


def test_s2r_claim_fails_when_clearly_worse():
    claims = check_claims({"dreamgym_s2r": cell((0, 20, 4)), "real_grpo": cell((20, 20, 40))})

    assert not claims["s2r_vs_real"]["holds"]
    assert "intervals disjoint" in claims["s2r_vs_real"]["why"]


def test_zero_real_claim_checks_the_real_rate_against_dreamgyms_interval():
    inside = check_claims({"dreamgym": cell((4, 10, 0)), "real_grpo": cell((5, 10, 40))})
    outside = check_claims({"dreamgym": cell((0, 30, 0)), "real_grpo": cell((15, 30, 40))})
    used_real = check_claims({"dreamgym": cell((9, 10, 3)), "real_grpo": cell((5, 10, 40))})

    assert inside["dreamgym_vs_real"]["holds"]
    assert not outside["dreamgym_vs_real"]["holds"]
    assert not used_real["dreamgym_vs_real"]["holds"]  # must use zero real interactions


def test_claims_skip_n_a_rows():
    claims = check_claims({"dreamgym": na_cell("why"), "real_grpo": cell((5, 10, 40))})

    assert claims["dreamgym_vs_real"] is None


# -- markdown -------------------------------------------------------------------------------------


def result_with(cells: dict) -> dict:
    rows = [
        {"key": "real_grpo", "label": "GRPO (real env)", "table": "main"},
        {"key": "dreamgym", "label": "DreamGym (GRPO)", "table": "main"},
        {"key": "no_reasoning", "label": "w/o experience reasoning", "table": "ablation"},
    ]
    return {
        "preset": "small",
        "environments": ["twx-coin"],
        "seeds": [0, 1, 2],
        "rows": rows,
        "cells": {"twx-coin": cells},
        "claims": {"twx-coin": check_claims(cells)},
        "shared": {"twx-coin": {"collect": {"trajectories": 36, "real_steps": 200}}},
        "seconds": 120.0,
        "notes": ["a note"],
    }


def test_markdown_report_has_both_tables_claims_and_n_a_reasons():
    cells = {
        "real_grpo": aggregate_cell(
            [seed(0, 3, 10, real=40), seed(1, 5, 10, real=40), seed(2, 7, 10, real=38)]
        ),
        "dreamgym": cell((4, 10, 0), (4, 10, 0), (4, 10, 0)),
        "no_reasoning": na_cell("no reasoning traces stored"),
    }

    md = markdown_report(result_with(cells))

    assert md.startswith("# DreamGym experiment — preset `small`")
    assert "### Table 1 — methods" in md and "### Table 2 — ablations" in md
    assert "| GRPO (real env) | 50.0 [33.2, 66.8] (±20.0) | 38–40 |" in md
    assert "| w/o experience reasoning | n/a | – |" in md
    assert "- w/o experience reasoning on twx-coin (n/a): no reasoning traces stored" in md
    assert "| DreamGym (GRPO) | s0: 40.0, s1: 40.0, s2: 40.0 |" in md
    assert "DreamGym (GRPO, 0 real) within the CI of GRPO (real env) — **holds**" in md
    assert "not shown worse" in md
    assert "36 real trajectories / 200 real steps" in md and "- a note" in md
    assert "(success_vs_real_twx-coin.png)" in md


def test_markdown_report_marks_failed_rows_with_their_error():
    cells = {
        "real_grpo": {"status": "failed", "reason": "seed 1: job grpo failed: boom"},
        "dreamgym": cell((4, 10, 0)),
        "no_reasoning": na_cell("no traces"),
    }

    md = markdown_report(result_with(cells))

    assert "| GRPO (real env) | failed | – |" in md
    assert "- GRPO (real env) on twx-coin (failed): seed 1: job grpo failed: boom" in md
    assert "within the CI of GRPO (real env)" not in md  # no claim without the real row


def test_markdown_report_shows_the_judge_means_when_present():
    cells = {"dreamgym": cell((4, 10, 0))}
    result = result_with(cells)
    fidelity = {"reward_accuracy": 0.9, "termination_accuracy": 0.8}
    judge = {
        "model": "gpt-4o",
        "sampled": 100,
        "judged": 97,
        "parse_failures": 3,
        "means": {
            "causal_consistency": 1.5,
            "diversity": 1.25,
            "informativeness": 1.0,
            "hallucination": 0.75,
        },
    }
    result["shared"]["twx-coin"]["fidelity"] = {**fidelity, "judge": judge}

    md = markdown_report(result)

    assert (
        "LLM judge (gpt-4o, 0–2, higher is better): causal consistency 1.50, diversity 1.25, "
        "informativeness 1.00, hallucination & failure feedback 0.75 (97 of 100 sampled "
        "transitions judged, 3 unparseable replies)." in md
    )


def test_markdown_report_without_judge_has_no_judge_line():
    result = result_with({"dreamgym": cell((4, 10, 0))})
    result["shared"]["twx-coin"]["fidelity"] = {"reward_accuracy": 0.9}

    md = markdown_report(result)

    assert "reward_accuracy 0.900" in md and "LLM judge" not in md


def test_markdown_report_judge_that_stopped_says_why():
    result = result_with({"dreamgym": cell((4, 10, 0))})
    judge = {
        "model": "m",
        "sampled": 10,
        "judged": 0,
        "parse_failures": 0,
        "means": dict.fromkeys(("causal_consistency", "diversity"), None),
        "error": "judge endpoint answered 401: invalid api key",
    }
    result["shared"]["twx-coin"]["fidelity"] = {"reward_accuracy": 0.9, "judge": judge}

    md = markdown_report(result)

    assert "no transition judged" in md and "stopped: judge endpoint answered 401" in md
