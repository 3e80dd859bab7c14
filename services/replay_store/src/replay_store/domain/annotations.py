"""Reasoning traces on stored transitions: which writes a ``PATCH /v1/transitions`` makes (pure).

A teacher (LLM or rules) annotates real transitions with R*_t, "why a_t in s_t leads to s_{t+1}
and r_{t+1}" (DreamGym, arXiv 2511.03773, §4.1.2, Eq. 5). The store keeps at most one trace per
transition. Writes are idempotent: sending the trace a transition already has changes nothing;
without ``overwrite`` an existing (different) trace is kept.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from dreamgym.errors import InvalidRequestError
from dreamgym.replay_types import TransitionReasoning

__all__ = ["ReasoningPlan", "distinct_reasoning_updates", "plan_reasoning_updates"]


@dataclass(frozen=True)
class ReasoningPlan:
    """What to write.

    Attributes:
        writes: ``id → reasoning`` to store.
        unchanged: ids sent that keep their current trace.
        missing: ids sent that the team does not store, in request order.
    """

    writes: dict[int, str]
    unchanged: int
    missing: list[int]


def distinct_reasoning_updates(updates: Sequence[TransitionReasoning]) -> dict[int, str]:
    """``id → reasoning`` of a request, in first-seen order.

    Raises:
        InvalidRequestError: an id appears twice with different reasoning (422 naming
            ``body.updates.<i>.id`` of the second occurrence).
    """
    out: dict[int, str] = {}
    for i, update in enumerate(updates):
        if out.setdefault(update.id, update.reasoning) != update.reasoning:
            raise InvalidRequestError(
                f"transition {update.id} appears twice in the request with different reasoning",
                param=f"body.updates.{i}.id",
            )
    return out


def plan_reasoning_updates(
    updates: Mapping[int, str], current: Mapping[int, str | None], *, overwrite: bool
) -> ReasoningPlan:
    """Decide which traces to write.

    Args:
        updates: ``id → new reasoning`` (distinct ids).
        current: ``id → stored reasoning`` (``None``: no trace) of the ids the team stores.
        overwrite: replace a different existing trace.

    Returns:
        The plan: an id is written when it is stored and its trace is absent, or differs and
        ``overwrite`` is set; it is unchanged otherwise; missing when not in ``current``.
    """
    writes: dict[int, str] = {}
    unchanged, missing = 0, []
    for transition_id, reasoning in updates.items():
        if transition_id not in current:
            missing.append(transition_id)
            continue
        stored = current[transition_id]
        if stored == reasoning or (stored is not None and not overwrite):
            unchanged += 1
        else:
            writes[transition_id] = reasoning
    return ReasoningPlan(writes=writes, unchanged=unchanged, missing=missing)
