"""Behaviour cloning (the SFT-on-expert-data row): examples, teacher decisions, training, job."""

from __future__ import annotations

import json
import math

import pytest
import torch

import agent_trainer.jobs.bc as bc_job
from agent_trainer.behaviour_cloning import (
    BCConfig,
    bc_examples,
    teacher_decision,
    train_behaviour_cloning,
)
from agent_trainer.config import ConfigValueError, PolicyConfig
from agent_trainer.jobs import JOB_KINDS, job_queue
from agent_trainer.jobs.schemas import VALIDATORS
from agent_trainer.policy import HistoryItem, LMPolicy
from agent_trainer.policy_io import load_policy_model
from dreamgym.jobs import JobContext, JobRecord
from dreamgym.replay_types import TransitionRecord

from .factories import PREFIX_ACTIONS, TINY, action_probabilities, make_state

ROOMS = ("kitchen", "pantry", "hallway")


def record(tid: str, step: int, action: str, *, policy="expert", won=False, last=False, rid=0):
    return TransitionRecord(
        id=rid,
        trajectory_id=tid,
        task="Find the coin.",
        environment="twx-coin",
        source="real",
        split="train",
        policy=policy,
        step=step,
        observation=f"You are in the {ROOMS[step]}.",
        admissible_actions=["move north", "take coin", "look around"],
        action=action,
        next_observation=f"You are in the {ROOMS[step + 1]}.",
        next_admissible_actions=["move north", "take coin", "look around"],
        reward=1.0 if won else 0.0,
        terminated=last,
        won=won if last else False,
    )


def trajectories():
    return [
        # given out of order: ids decide the trajectory order, steps the order inside
        record("won-b", 1, "take coin", won=True, last=True, rid=11),
        record("won-b", 0, "move north", rid=10),
        record("won-a", 0, "take coin", won=True, last=True, rid=1),
        record("lost", 0, "move north", rid=5),
        record("lost", 1, "look around", last=True, rid=6),
        record("rand", 0, "take coin", policy="random", won=True, last=True, rid=7),
    ]


# -- examples -----------------------------------------------------------------------------------


def test_bc_examples_keep_won_expert_trajectories_with_their_history():
    examples = bc_examples(trajectories(), behaviour_policies=["expert"])

    assert [(e.trajectory_id, e.state.step, e.action) for e in examples] == [
        ("won-a", 0, "take coin"),
        ("won-b", 0, "move north"),
        ("won-b", 1, "take coin"),
    ]
    assert examples[2].history == (HistoryItem("You are in the kitchen.", "move north"),)
    assert examples[2].state.observation == "You are in the pantry."


def test_bc_examples_filters_policies_won_and_max_trajectories():
    every = bc_examples(trajectories(), behaviour_policies=["expert", "random"], won_only=False)
    first = bc_examples(trajectories(), behaviour_policies=["expert"], max_trajectories=1)

    assert {e.trajectory_id for e in every} == {"won-a", "lost", "rand", "won-b"}
    assert [e.trajectory_id for e in first] == ["won-a"]


# -- teacher decisions --------------------------------------------------------------------------


@pytest.mark.model
def test_teacher_decisions_over_admissible_actions_form_a_distribution(make_policy):
    policy = make_policy(seed=3)
    state = make_state(PREFIX_ACTIONS)  # shared prefixes: "go" / "go north" / "go north east"

    with torch.no_grad():
        log_probs, _ = policy.completion_log_probs(
            [teacher_decision(policy, state, a) for a in PREFIX_ACTIONS]
        )

    total = sum(math.exp(float(row.sum())) for row in log_probs)
    assert total == pytest.approx(1.0, abs=1e-5)


@pytest.mark.model
def test_teacher_decision_matches_what_constrained_decoding_records(make_policy):
    policy = make_policy(seed=1)
    state = make_state(PREFIX_ACTIONS)
    torch.manual_seed(0)
    sampled = policy.act([state] * 16, [[]] * 16, generator=torch.Generator().manual_seed(0))

    for d in sampled:
        taught = teacher_decision(policy, state, d.action)
        assert (taught.completion_ids, taught.allowed) == (d.completion_ids, d.allowed)


@pytest.mark.model
def test_teacher_decision_rejects_an_inadmissible_action(make_policy):
    with pytest.raises(ValueError, match="not admissible"):
        teacher_decision(make_policy(seed=0), make_state(), "fly away")


# -- training -----------------------------------------------------------------------------------


@pytest.mark.model
def test_behaviour_cloning_makes_the_expert_action_likely_and_saves_it(make_policy, tmp_path):
    policy: LMPolicy = make_policy(seed=0)
    examples = bc_examples(trajectories(), behaviour_policies=["expert"])
    pantry = examples[2]  # the only example in its state: "take coin" after "move north"
    before = action_probabilities(policy, pantry.state, pantry.history)["take coin"]
    epochs: list[dict] = []
    config = BCConfig(
        epochs=20, learning_rate=1e-2, minibatch_size=8, policy=PolicyConfig(model=TINY)
    )

    summary = train_behaviour_cloning(
        policy, examples, config, run_dir=tmp_path, on_epoch=lambda e, m: epochs.append(m)
    )

    after = action_probabilities(policy, pantry.state, pantry.history)["take coin"]
    model, tokenizer = load_policy_model(summary["checkpoint"])
    reloaded = action_probabilities(LMPolicy(model, tokenizer), pantry.state, pantry.history)
    assert after > max(before, 0.8)
    assert reloaded["take coin"] == pytest.approx(after, abs=1e-5)
    assert summary["final_nll"] < summary["initial_nll"]
    assert len(epochs) == 20 and epochs[-1]["bc/nll"] == pytest.approx(summary["final_nll"])


def test_behaviour_cloning_without_examples_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="no behaviour-cloning examples"):
        train_behaviour_cloning(None, [], BCConfig(), run_dir=tmp_path)  # type: ignore[arg-type]


# -- the job ------------------------------------------------------------------------------------


def test_bc_job_is_registered_on_the_gpu_queue_and_validates_its_section():
    with pytest.raises(Exception) as info:
        VALIDATORS["bc"]({"bc": {"epochs": 0}})

    assert JOB_KINDS["bc"] == "agent_trainer.jobs.bc:run"
    assert job_queue("bc", {}) == "gpu"
    assert info.value.errors()[0]["loc"][:2] == ("bc", "epochs")  # type: ignore[attr-defined]
    with pytest.raises(ConfigValueError):
        BCConfig(environment="no-such-env")


class FakeReplayStore:
    def __init__(self, *args, **kwargs) -> None:
        self.queries: list[dict] = []
        FakeReplayStore.last = self

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        return None

    def iter_transitions(self, **filters):
        self.queries.append(filters)
        return iter(trajectories())


@pytest.mark.model
def test_bc_job_trains_on_the_stores_real_train_expert_data(tmp_path, monkeypatch):
    monkeypatch.setattr(bc_job, "ReplayStoreClient", FakeReplayStore)
    config = VALIDATORS["bc"](
        {
            "bc": {"epochs": 2, "policy": {"model": TINY, "init_seed": 4}},
            "services": {"replay_store": "http://x"},
        }
    )
    ctx = JobContext(tmp_path, "job-bc")
    (ctx.workdir / "status.json").write_text(
        JobRecord(job_id="job-bc", kind="bc", config=config).model_dump_json()
    )

    result = bc_job.run(config, ctx)

    assert FakeReplayStore.last.queries == [
        {"environment": "twx-coin", "source": "real", "split": "train"}
    ]
    assert (result["trajectories"], result["real_transitions_used"]) == (2, 3)
    assert result["real_env_steps"] == 0
    assert (tmp_path / "job-bc" / "run" / "checkpoint" / "config.json").exists()
    rows = [json.loads(x) for x in (tmp_path / "job-bc" / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [0, 1]
