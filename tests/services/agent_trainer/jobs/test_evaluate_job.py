"""The ``evaluate`` job with several policies in one job (same held-out games, own usage each)."""

from __future__ import annotations

import pytest

from agent_trainer.jobs import evaluate, job_queue
from agent_trainer.jobs.schemas import VALIDATORS
from agent_trainer.policy_io import save_policy_model
from dreamgym.jobs import JobContext, JobRecord
from dreamgym.llm.models import load_causal_lm

from ..factories import TINY


def run_job(tmp_path, section: dict) -> dict:
    config = VALIDATORS["evaluate"]({"evaluate": section})
    ctx = JobContext(tmp_path, "job-eval")
    (ctx.workdir / "status.json").write_text(
        JobRecord(job_id="job-eval", kind="evaluate", config=config).model_dump_json()
    )
    return evaluate.run(config, ctx)


@pytest.mark.model
@pytest.mark.envs
def test_evaluate_job_policies_each_play_the_same_games_with_their_own_usage(tmp_path):
    model, tokenizer = load_causal_lm(TINY, seed=0)
    save_policy_model(model, tokenizer, tmp_path / "ckpt", base_model=TINY, init_seed=0)
    section = {"episodes": 3, "max_steps": 4, "concurrency": 1, "seed": 2}
    single = run_job(tmp_path / "a", {**section, "policy": "random"})

    out = run_job(tmp_path / "b", {**section, "policies": ["random", str(tmp_path / "ckpt")]})

    results = out["results"]
    assert [r["policy"] for r in results] == ["random", str(tmp_path / "ckpt")]
    assert {k: v for k, v in results[0].items() if k != "usage"} == single  # same games, seed
    assert all(r["episodes"] == 3 and r["real_steps"] >= 3 for r in results)
    assert all(r["usage"]["wall_s"] > 0 and r["usage"]["cpu_s"] > 0 for r in results)


def test_evaluate_job_queue_is_cpu_only_for_random_policies():
    assert job_queue("evaluate", {"evaluate": {"policies": ["random", "random"]}}) == "cpu"
    assert job_queue("evaluate", {"evaluate": {"policies": ["random", "/ckpt"]}}) == "gpu"
    assert job_queue("evaluate", {"evaluate": {"policy": "/ckpt"}}) == "gpu"


def test_evaluate_job_rejects_a_malformed_policy_spec_in_policies():
    with pytest.raises(Exception) as info:
        VALIDATORS["evaluate"]({"evaluate": {"policies": ["tiny:layers=x"]}})

    assert info.value.errors()[0]["loc"][:2] == ("evaluate", "policies")  # type: ignore[attr-defined]
