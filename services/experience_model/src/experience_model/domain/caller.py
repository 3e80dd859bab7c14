"""Who a step is computed for: the caller's team and the API key it presented.

Episodes belong to a team (:attr:`~experience_model.domain.episodes.Episode.team`); a step also
needs the caller's key, because retrieval queries the replay store *as the caller* (the replay
store only returns the team's own transitions). The key travels with the query through the
micro-batcher inside a :class:`CallerStepQuery` and is never part of a ``repr`` or a log line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dreamgym.auth.keys import DEFAULT_TEAM
from experience_model.domain.simulator import StepQuery

__all__ = ["DEFAULT_CALLER", "Caller", "CallerStepQuery", "caller_of"]


@dataclass(frozen=True)
class Caller:
    """The team a request acts for, and the key it presented.

    Attributes:
        team: the caller's team (``"default"`` when authentication is disabled).
        api_key: the presented key, forwarded to the replay store for retrieval; ``None`` when
            authentication is disabled (the service's own key, if any, is used instead).
            Excluded from ``repr``.
    """

    team: str = DEFAULT_TEAM
    api_key: str | None = field(default=None, repr=False)


DEFAULT_CALLER = Caller()
"""The single-user caller: team ``"default"``, no key of its own."""


@dataclass(frozen=True, kw_only=True)
class CallerStepQuery(StepQuery):
    """A :class:`StepQuery` that also says whom it is computed for (read by the retriever)."""

    caller: Caller = DEFAULT_CALLER


def caller_of(query: StepQuery) -> Caller:
    """The caller of ``query`` (:data:`DEFAULT_CALLER` for a plain :class:`StepQuery`)."""
    return query.caller if isinstance(query, CallerStepQuery) else DEFAULT_CALLER
