"""Tests of the reasoning-trace write plan (replay_store.domain.annotations), hand-computed."""

from __future__ import annotations

import pytest

from dreamgym.errors import InvalidRequestError
from dreamgym.replay_types import TransitionReasoning
from replay_store.domain.annotations import distinct_reasoning_updates, plan_reasoning_updates


def test_plan_writes_missing_traces_and_keeps_existing_ones_without_overwrite():
    current = {1: None, 2: "old", 3: "same"}

    plan = plan_reasoning_updates({1: "a", 2: "b", 3: "same"}, current, overwrite=False)

    assert plan.writes == {1: "a"}
    assert plan.unchanged == 2
    assert plan.missing == []


def test_plan_with_overwrite_replaces_different_traces_only():
    current = {1: None, 2: "old", 3: "same"}

    plan = plan_reasoning_updates({1: "a", 2: "b", 3: "same"}, current, overwrite=True)

    assert plan.writes == {1: "a", 2: "b"}
    assert plan.unchanged == 1


def test_plan_reports_ids_not_stored_in_request_order():
    plan = plan_reasoning_updates({9: "x", 1: "a", 7: "y"}, {1: None}, overwrite=False)

    assert plan.missing == [9, 7]
    assert plan.writes == {1: "a"}


def test_plan_applied_twice_writes_nothing_the_second_time():
    updates = {1: "a", 2: "b"}
    first = plan_reasoning_updates(updates, {1: None, 2: None}, overwrite=True)
    after = {1: None, 2: None} | first.writes

    second = plan_reasoning_updates(updates, after, overwrite=True)

    assert second.writes == {}
    assert second.unchanged == 2


def test_distinct_updates_accepts_exact_repeats():
    updates = [TransitionReasoning(id=4, reasoning="r"), TransitionReasoning(id=4, reasoning="r")]

    assert distinct_reasoning_updates(updates) == {4: "r"}


def test_distinct_updates_conflicting_repeat_is_422_naming_second_occurrence():
    updates = [
        TransitionReasoning(id=4, reasoning="r"),
        TransitionReasoning(id=5, reasoning="s"),
        TransitionReasoning(id=4, reasoning="other"),
    ]

    with pytest.raises(InvalidRequestError) as info:
        distinct_reasoning_updates(updates)

    assert info.value.param == "body.updates.2.id"
