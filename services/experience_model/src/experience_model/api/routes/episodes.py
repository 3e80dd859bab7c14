"""Episode routes: reset, step, read, close (OpenEnv/Gymnasium-style, stateful over HTTP).

Every episode belongs to the team of the key that reset it: another team's episode id answers
404 ``episode_not_found`` exactly like an unknown one (ids are per team), and a team over its
live-episode quota gets 429 ``quota_exceeded`` with ``Retry-After``.
"""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from dreamgym.errors import DreamGymError, ErrorResponse
from dreamgym.experience_types import (
    BatchStepRequest,
    BatchStepResponse,
    BatchStepResult,
    EpisodeDetail,
    EpisodeResetRequest,
    EpisodeResponse,
    EpisodeStepRequest,
    EpisodeStepResponse,
    StepInfo,
)
from dreamgym.server import bind_log_context, cancel_on_disconnect
from experience_model.api.deps import CallerDep, EpisodeServiceDep
from experience_model.domain.episodes import Episode
from experience_model.domain.service import StepOutcome

router = APIRouter(prefix="/v1/episodes", tags=["episodes"])

_ERRORS = {code: {"model": ErrorResponse} for code in (401, 404, 409, 422, 429, 502, 503, 504)}


def _episode(ep: Episode) -> EpisodeResponse:
    return EpisodeResponse(
        episode_id=ep.episode_id,
        task_id=ep.task.task_id,
        state=ep.state,
        terminated=ep.terminated,
        truncated=ep.truncated,
        max_steps=ep.max_steps,
    )


@router.post("", response_model=EpisodeResponse, status_code=201, responses=_ERRORS)
def reset_episode(
    body: EpisodeResetRequest, service: EpisodeServiceDep, caller: CallerDep
) -> EpisodeResponse:
    """Start an imagined episode of the caller's team in the task's initial abstract state."""
    ep = service.reset(
        body.task,
        seed=body.seed,
        max_steps=body.max_steps,
        episode_id=body.episode_id,
        team=caller.team,
        options=body.options,
    )
    return _episode(ep)


def _step_response(episode_id: str, out: StepOutcome) -> EpisodeStepResponse:
    p, tr = out.prediction, out.transition
    return EpisodeStepResponse(
        episode_id=episode_id,
        observation=tr.next_observation,
        admissible_actions=tr.next_admissible_actions,
        reward=tr.reward,
        terminated=tr.terminated,
        truncated=tr.truncated,
        state=out.episode.state,
        transition=tr,
        info=StepInfo(
            reasoning=p.reasoning,
            won=bool(tr.won),
            retrieved=p.retrieved,
            attempts=p.attempts,
            latency_ms=round(p.latency_ms, 3),
            prompt_tokens=p.prompt_tokens,
            completion_tokens=p.completion_tokens,
        ),
    )


@router.post("/{episode_id}/step", response_model=EpisodeStepResponse, responses=_ERRORS)
async def step_episode(
    episode_id: str,
    body: EpisodeStepRequest,
    service: EpisodeServiceDep,
    request: Request,
    caller: CallerDep,
) -> EpisodeStepResponse:
    """Apply one action; the experience model predicts next observation, reward and flags.

    A client that disconnects before the answer cancels the step (its queued work is dropped and
    the episode is unchanged).
    """
    bind_log_context(episode_id=episode_id)
    out = await cancel_on_disconnect(
        request, service.step(episode_id, body.action, seed=body.seed, caller=caller)
    )
    return _step_response(episode_id, out)


@router.post(":step", response_model=BatchStepResponse, responses=_ERRORS)
async def step_episodes(
    body: BatchStepRequest, service: EpisodeServiceDep, request: Request, caller: CallerDep
) -> BatchStepResponse:
    """Advance many episodes in one model batch; each item gets a result or its own error."""
    items = [(s.episode_id, s.action, s.seed) for s in body.steps]
    outcomes = await cancel_on_disconnect(request, service.step_many(items, caller=caller))
    results = []
    for item, out in zip(body.steps, outcomes, strict=True):
        if isinstance(out, DreamGymError):
            results.append(BatchStepResult(error=out.to_response().error))
        elif isinstance(out, BaseException):
            raise out
        else:
            results.append(BatchStepResult(result=_step_response(item.episode_id, out)))
    return BatchStepResponse(results=results)


@router.get("/{episode_id}", response_model=EpisodeDetail, responses=_ERRORS)
def get_episode(episode_id: str, service: EpisodeServiceDep, caller: CallerDep) -> EpisodeDetail:
    """The episode's current state and transitions."""
    ep = service.get(episode_id, team=caller.team)
    return EpisodeDetail(**_episode(ep).model_dump(), transitions=list(ep.transitions))


@router.delete("/{episode_id}", status_code=204, responses=_ERRORS)
def close_episode(episode_id: str, service: EpisodeServiceDep, caller: CallerDep) -> Response:
    """Close the episode and free its state (404 if it does not exist)."""
    from dreamgym.errors import EpisodeNotFoundError  # noqa: PLC0415

    if not service.close(episode_id, team=caller.team):
        raise EpisodeNotFoundError(episode_id)
    return Response(status_code=204)
