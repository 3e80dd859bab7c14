"""Experiment rows and presets."""

from __future__ import annotations

import pytest

from dreamgym.experiment import PRESETS, ROWS, ExperimentConfig, preset


def test_presets_run_every_row_on_three_seeds_and_document_their_runtime():
    for name in ("small", "full"):
        cfg = PRESETS[name]
        assert cfg.ordered_rows() == list(ROWS)
        assert len(cfg.seeds) >= 3
        assert cfg.expected_runtime
        assert cfg.s2r_steps * 10 <= cfg.real_budget


def test_headline_preset_runs_the_headline_rows_on_three_seeds_with_s2r_a_tenth_of_b():
    cfg = PRESETS["headline"]
    assert cfg.ordered_rows() == ["before_rl", "real_grpo", "dreamgym", "dreamgym_s2r"]
    assert len(cfg.seeds) >= 3
    assert cfg.s2r_steps == cfg.real_budget // 10 == 250
    assert cfg.expected_runtime


def test_rows_cover_tables_one_and_two():
    assert {k for k, r in ROWS.items() if r.table == "ablation"} == {
        "no_replay",
        "no_reasoning",
        "no_curriculum",
    }
    assert {"before_rl", "sft_expert", "real_grpo", "dreamgym", "dreamgym_s2r"} <= set(ROWS)
    assert {"dreamgym_ppo", "real_ppo"} <= set(ROWS)


def test_s2r_budget_defaults_to_a_tenth_of_b():
    assert ExperimentConfig(real_budget=55).s2r_steps == 5


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"s2r_budget": 11, "real_budget": 100}, "at most real_budget / 10"),
        ({"rows": ("dreamgym_s2r",)}, "add dreamgym"),
        ({"rows": ("before_rl", "sft_expert")}, "initial checkpoint"),
        ({"rows": ("nope",)}, "unknown rows"),
        ({"seeds": (0, 0)}, "distinct"),
        ({"environments": ()}, "at least one"),
    ],
)
def test_invalid_configs_say_what_is_wrong(fields, message):
    with pytest.raises(ValueError, match=message):
        ExperimentConfig(**fields)


def test_preset_overrides_and_unknown_preset():
    cfg = preset("small", environments=("twx-coin", "twx-twc"), seeds=None)

    assert cfg.environments == ("twx-coin", "twx-twc") and cfg.seeds == (0, 1, 2)
    with pytest.raises(ValueError, match="valid: \\['full', 'headline', 'small'\\]"):
        preset("medium")
