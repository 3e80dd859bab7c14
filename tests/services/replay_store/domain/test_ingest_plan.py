"""Unit tests of replay_store.domain.ingest: in-batch dedup, store classification, storability."""

from __future__ import annotations

import pytest

from dreamgym.errors import InvalidRequestError
from replay_store.domain.errors import TrajectoryConflictError
from replay_store.domain.ingest import plan_against_store, plan_batch, unstorable_field


def test_plan_batch_repeated_trajectory_resolves_to_first(make_trajectory):
    a, b = make_trajectory(), make_trajectory(actions=("look",))

    plan = plan_batch([a, b, a])

    assert len(plan.unique) == 2
    assert plan.refs == [0, 1, 0]
    assert plan.first_index == [0, 1]


def test_plan_batch_same_content_under_two_ids_is_one_trajectory(make_trajectory):
    plan = plan_batch([make_trajectory(trajectory_id="x"), make_trajectory(trajectory_id="y")])

    assert [p.trajectory_id for p in plan.unique] == ["x"]
    assert plan.refs == [0, 0]


def test_plan_batch_same_id_different_content_raises_conflict_naming_index(make_trajectory):
    batch = [make_trajectory(trajectory_id="x"), make_trajectory(trajectory_id="x", won=False)]

    with pytest.raises(TrajectoryConflictError) as info:
        plan_batch(batch)

    assert info.value.param == "body.trajectories.1.trajectory_id"
    assert "'x'" in info.value.message


def test_plan_batch_nul_character_raises_invalid_request_naming_field(make_trajectory):
    bad = make_trajectory(observations=("a\x00b", "c", "d"))

    with pytest.raises(InvalidRequestError) as info:
        plan_batch([make_trajectory(), bad])

    assert info.value.param == "body.trajectories.1.transitions.0.observation"


def test_plan_against_store_classifies_new_duplicate_and_same_content(make_trajectory):
    same_content = make_trajectory(trajectory_id="new-id-same-content")
    fresh = make_trajectory(actions=("look",), trajectory_id="fresh")
    exact_duplicate = make_trajectory(actions=("wait",), trajectory_id="dup")
    batch = plan_batch([same_content, fresh, exact_duplicate])
    store = {"old": batch.unique[0].content_hash, "dup": batch.unique[2].content_hash}

    plan = plan_against_store(batch, store)

    assert [p.trajectory_id for p in plan.new] == ["fresh"]
    assert plan.stored_ids == ["old", "fresh", "dup"]


def test_plan_against_store_stored_id_with_other_content_raises_conflict(make_trajectory):
    batch = plan_batch([make_trajectory(), make_trajectory(actions=("look",), trajectory_id="x")])

    with pytest.raises(TrajectoryConflictError) as info:
        plan_against_store(batch, {"x": "0" * 64})

    assert info.value.param == "body.trajectories.1.trajectory_id"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"a": ["ok", "bad\x00"]}, ("root.a.1", "NUL")),
        ({"seed": 2**63}, ("root.seed", "64-bit")),
        ({"reward": float("nan")}, ("root.reward", "finite")),
        ({"reward": float("inf"), "flag": True, "n": -(2**63)}, ("root.reward", "finite")),
    ],
)
def test_unstorable_field_finds_first_bad_value(value, expected):
    path, reason = unstorable_field(value, "root")

    assert (path, expected[1] in reason) == (expected[0], True)


def test_unstorable_field_storable_value_returns_none():
    assert unstorable_field({"a": [1, 2.5, "x", None, True], "b": {"c": 2**63 - 1}}, "r") is None
