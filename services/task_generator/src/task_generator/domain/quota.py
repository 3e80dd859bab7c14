"""Per-team task quota (pure): how many tasks, seed and generated, one team may store."""

from __future__ import annotations

from dataclasses import dataclass

from task_generator.domain.errors import TaskQuotaExceededError

__all__ = ["TaskQuota"]


@dataclass(frozen=True, kw_only=True)
class TaskQuota:
    """A team's task quota.

    Attributes:
        max_tasks_per_team: most tasks one team may store; ``None``: unlimited.
        retry_after_s: ``Retry-After`` (seconds) of the 429 when the quota is reached.

    >>> TaskQuota(max_tasks_per_team=2).check_room("lab-a", stored=2)
    Traceback (most recent call last):
    ...
    task_generator.domain.errors.TaskQuotaExceededError: team 'lab-a' stores 2 tasks; ...
    """

    max_tasks_per_team: int | None = None
    retry_after_s: float = 60.0

    def __post_init__(self) -> None:
        if self.max_tasks_per_team is not None and self.max_tasks_per_team < 1:
            raise ValueError(f"max_tasks_per_team must be >= 1, got {self.max_tasks_per_team}")
        if self.retry_after_s <= 0:
            raise ValueError(f"retry_after_s must be > 0, got {self.retry_after_s}")

    def exceeded(self, team: str, stored: int, param: str = "body.tasks") -> TaskQuotaExceededError:
        """The 429 for ``team`` storing ``stored`` tasks (the quota must be set)."""
        assert self.max_tasks_per_team is not None
        return TaskQuotaExceededError(
            team, stored, self.max_tasks_per_team, self.retry_after_s, param=param
        )

    def check_room(self, team: str, stored: int, param: str = "body.tasks") -> None:
        """Refuse to start work that can only add tasks when none fit any more.

        Raises:
            TaskQuotaExceededError: the quota is set and ``stored >= max_tasks_per_team``.
        """
        if self.max_tasks_per_team is not None and stored >= self.max_tasks_per_team:
            raise self.exceeded(team, stored, param)
