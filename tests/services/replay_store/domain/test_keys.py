"""Unit tests of replay_store.domain.keys: content hash, trajectory id, retrieval key."""

from __future__ import annotations

import re

from dreamgym.types import Trajectory
from replay_store.domain.keys import (
    content_hash,
    prepare_trajectory,
    retrieval_key,
    trajectory_retrieval_keys,
)


def test_content_hash_same_content_is_equal_and_hex_sha256(make_trajectory):
    a, b = make_trajectory(), make_trajectory()

    digest = content_hash(a)

    assert digest == content_hash(b)
    assert re.fullmatch(r"[0-9a-f]{64}", digest)


def test_content_hash_ignores_trajectory_id(make_trajectory):
    assert content_hash(make_trajectory(trajectory_id="x")) == content_hash(make_trajectory())


def test_content_hash_explicit_defaults_equal_omitted_fields(make_trajectory):
    wire = make_trajectory().model_dump(mode="json", exclude_defaults=True)
    explicit = make_trajectory().model_dump(mode="json")

    assert content_hash(Trajectory.model_validate(wire)) == content_hash(
        Trajectory.model_validate(explicit)
    )


def test_content_hash_changes_with_any_content_field(make_trajectory):
    base = make_trajectory()
    changed_reward = base.model_copy(deep=True)
    changed_reward.transitions[0].reward = 0.5
    changed_policy = make_trajectory(policy="random")
    changed_task_id = base.model_copy(update={"task_id": "twx-coin/train/0"})

    digests = {content_hash(t) for t in (base, changed_reward, changed_policy, changed_task_id)}

    assert len(digests) == 4


def test_prepare_trajectory_without_id_uses_traj_prefixed_content_hash(make_trajectory):
    prepared = prepare_trajectory(make_trajectory())

    assert prepared.trajectory_id == f"traj-{prepared.content_hash}"
    assert prepared.trajectory.trajectory_id == prepared.trajectory_id


def test_prepare_trajectory_with_client_id_keeps_it(make_trajectory):
    prepared = prepare_trajectory(make_trajectory(trajectory_id="episode-7"))

    assert prepared.trajectory_id == "episode-7"
    assert prepared.content_hash == content_hash(make_trajectory())


def test_retrieval_key_contains_action_observation_and_task_action_first():
    key = retrieval_key(" find coin ", "You see a coin.\n", "take coin")

    assert key == "Action: take coin\nObservation: You see a coin.\nTask: find coin"


def test_trajectory_retrieval_keys_match_query_keys_step_by_step(make_trajectory):
    trajectory = make_trajectory(actions=("go north", "take coin", "look"))

    keys = trajectory_retrieval_keys(trajectory)

    assert keys == [
        retrieval_key(trajectory.task, t.observation, t.action) for t in trajectory.transitions
    ]
    assert len(set(keys)) == 3
