"""OpenEnv sessions over the episode service (the protocol is in :mod:`dreamgym.openenv_types`).

An :class:`OpenEnvSession` is what one OpenEnv WebSocket connection drives: at most one live
imagined episode, replaced on every ``reset`` and closed with the session. The pure functions
map episodes and step outcomes to OpenEnv observations and states; the HTTP routes use them
too (HTTP carries the ``episode_id`` instead of a session). A session acts for one
:class:`~experience_model.domain.caller.Caller` (the key of its handshake): its episodes belong
to that caller's team.
"""

from __future__ import annotations

from dreamgym.auth.keys import DEFAULT_TEAM
from dreamgym.errors import ConflictError
from dreamgym.openenv_types import (
    ExperienceModelAction,
    ExperienceModelObservation,
    ExperienceModelState,
    OpenEnvResetRequest,
)
from experience_model.domain.caller import DEFAULT_CALLER, Caller
from experience_model.domain.episodes import Episode
from experience_model.domain.service import EpisodeService, StepOutcome

__all__ = [
    "NoEpisodeError",
    "OpenEnvSession",
    "episode_state",
    "observation_after_reset",
    "observation_after_step",
    "reset_episode",
]


class NoEpisodeError(ConflictError):
    """A session was stepped before any reset (409; OpenEnv code ``SESSION_ERROR``)."""

    error_type = "no_episode"

    def __init__(self) -> None:
        super().__init__("this session has no episode: send a reset first", param="type")


def observation_after_reset(episode: Episode) -> ExperienceModelObservation:
    """The observation of a freshly reset episode (``reward`` is ``None``)."""
    return ExperienceModelObservation(
        text=episode.state.observation,
        admissible_actions=list(episode.state.admissible_actions),
        task=episode.task.instruction,
        task_id=episode.task.task_id,
        episode_id=episode.episode_id,
        step=episode.state.step,
    )


def observation_after_step(outcome: StepOutcome) -> ExperienceModelObservation:
    """The observation after one step: next state, reward, flags and reasoning."""
    episode, transition = outcome.episode, outcome.transition
    return ExperienceModelObservation(
        done=transition.terminated or transition.truncated,
        reward=transition.reward,
        text=transition.next_observation,
        admissible_actions=list(transition.next_admissible_actions),
        task=episode.task.instruction,
        task_id=episode.task.task_id,
        episode_id=episode.episode_id,
        step=episode.state.step,
        terminated=transition.terminated,
        truncated=transition.truncated,
        reasoning=outcome.prediction.reasoning,
        won=bool(transition.won),
    )


def episode_state(episode: Episode) -> ExperienceModelState:
    """OpenEnv ``State`` of an episode."""
    return ExperienceModelState(
        episode_id=episode.episode_id,
        step_count=episode.state.step,
        task_id=episode.task.task_id,
        task=episode.task.instruction,
        observation=episode.state.observation,
        admissible_actions=list(episode.state.admissible_actions),
        terminated=episode.terminated,
        truncated=episode.truncated,
        max_steps=episode.max_steps,
    )


def reset_episode(
    service: EpisodeService, request: OpenEnvResetRequest, team: str = DEFAULT_TEAM
) -> Episode:
    """Start the episode of ``team`` an OpenEnv reset asks for (errors as
    :meth:`EpisodeService.reset`)."""
    return service.reset(
        request.task,
        seed=request.seed,
        max_steps=request.max_steps,
        episode_id=request.episode_id,
        team=team,
    )


class OpenEnvSession:
    """One OpenEnv session (a WebSocket connection): at most one live episode.

    Args:
        service: the episode service.
        caller: whom the session acts for (its episodes belong to ``caller.team``).

    Attributes:
        episode_id: the session's live episode, ``None`` before the first reset.
    """

    def __init__(self, service: EpisodeService, caller: Caller = DEFAULT_CALLER) -> None:
        self.service = service
        self.caller = caller
        self.episode_id: str | None = None

    def reset(self, request: OpenEnvResetRequest) -> ExperienceModelObservation:
        """Close the session's episode and start a new one."""
        self.close()
        episode = reset_episode(self.service, request, self.caller.team)
        self.episode_id = episode.episode_id
        return observation_after_reset(episode)

    async def step(self, action: ExperienceModelAction) -> ExperienceModelObservation:
        """Step the session's episode.

        Raises:
            NoEpisodeError: no reset yet.
            DreamGymError: as :meth:`EpisodeService.step` (409 finished, 502, 504, ...).
        """
        if self.episode_id is None:
            raise NoEpisodeError()
        outcome = await self.service.step(
            self.episode_id, action.text, seed=action.seed, caller=self.caller
        )
        return observation_after_step(outcome)

    def state(self) -> ExperienceModelState:
        """The episode's state (an empty state before the first reset)."""
        if self.episode_id is None:
            return ExperienceModelState()
        return episode_state(self.service.get(self.episode_id, team=self.caller.team))

    def close(self) -> None:
        """Free the session's episode, if any."""
        if self.episode_id is not None:
            self.service.close(self.episode_id, team=self.caller.team)
            self.episode_id = None
