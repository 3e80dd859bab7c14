"""The ``small`` preset of ``dreamgym experiment`` end to end through the real services.

Starts the real local stack (PostgreSQL + pgvector, Redis, the four services, Celery workers),
collects real seed data, trains the experience models, runs every row's jobs for 3 seeds and
evaluates them on held-out real games. Checks that every row is produced (only ``no_reasoning``
may be n/a, and only with a reason), that real-interaction budgets are met exactly, and that the
report files are written.
"""

from __future__ import annotations

import json

import pytest

from dreamgym.experiment import PRESETS, ROWS
from dreamgym.experiment.runner import run_experiment

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.slow]

REAL_ROWS = {"real_grpo", "real_ppo"}
S2R_ROWS = {"dreamgym_s2r", "dreamgym_ppo_s2r"}
IMAGINED_ROWS = {"dreamgym", "dreamgym_ppo", "no_replay", "no_reasoning", "no_curriculum"}


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("experiment")
    paths = run_experiment(PRESETS["small"], out, preset_name="small")
    return {"paths": paths, "result": json.loads(paths["json"].read_text()), "out": out}


def test_every_row_is_produced_and_only_no_reasoning_may_be_n_a(experiment):
    cells = experiment["result"]["cells"]["twx-coin"]

    assert list(cells) == list(ROWS)
    for row, cell in cells.items():
        if row == "no_reasoning" and cell["status"] == "n/a":
            assert "reasoning trace" in cell["reason"]
            continue
        assert cell["status"] == "ok", (row, cell.get("reason"))
        assert [s["seed"] for s in cell["per_seed"]] == [0, 1, 2]
        pooled = cell["pooled"]
        assert pooled["episodes"] == 3 * PRESETS["small"].eval_episodes
        assert 0.0 <= pooled["ci95_low"] <= pooled["success_rate"] <= pooled["ci95_high"] <= 1.0


def test_real_interactions_are_measured_and_budgets_exact(experiment):
    cells = experiment["result"]["cells"]["twx-coin"]
    cfg = PRESETS["small"]

    for row, cell in cells.items():
        if cell["status"] != "ok":
            continue
        per_seed = cell["real_interactions"]["per_seed"]
        if row in REAL_ROWS:
            assert per_seed == [cfg.real_budget] * 3
        elif row in S2R_ROWS:
            assert per_seed == [cfg.s2r_steps] * 3
            assert cfg.s2r_steps * 10 <= cfg.real_budget
        elif row in IMAGINED_ROWS or row == "before_rl":
            assert per_seed == [0, 0, 0]
        elif row == "sft_expert":
            assert min(per_seed) > 0


def test_training_rows_report_their_costs(experiment):
    cells = experiment["result"]["cells"]["twx-coin"]

    for row, cell in cells.items():
        if cell["status"] != "ok" or row == "before_rl":
            continue
        cost = cell["cost"]
        assert cost["train_wall_s"] > 0 and cost["train_cpu_s"] > 0, row
        assert cost["eval_wall_s"] > 0, row
    imagined, real = cells["dreamgym"]["cost"], cells["real_grpo"]["cost"]
    assert imagined["services_cpu_s"] > real["services_cpu_s"]  # the experience model works


def test_claims_are_checked_and_the_report_files_written(experiment):
    result, paths, out = experiment["result"], experiment["paths"], experiment["out"]

    claims = result["claims"]["twx-coin"]
    assert {"s2r_vs_real", "dreamgym_vs_real", "ppo_s2r_vs_real", "ppo_dreamgym_vs_real"} <= set(
        claims
    )
    assert all(isinstance(c["holds"], bool) for c in claims.values())
    md = paths["md"].read_text()
    assert "### Table 1 — methods" in md and "### Table 2 — ablations" in md
    for name in ("success_vs_real_twx-coin.png", "training_curves_twx-coin.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    assert result["shared"]["twx-coin"]["collect"]["real_steps"] > 0
    assert "reward_accuracy" in result["shared"]["twx-coin"]["fidelity"]
