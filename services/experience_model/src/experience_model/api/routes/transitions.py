"""Stateless prediction: the next state for a given (task, history, state, action)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from dreamgym.errors import ErrorResponse, MalformedTransitionError
from dreamgym.experience_types import Prediction, PredictRequest, PredictResponse
from dreamgym.server import cancel_on_disconnect
from experience_model.api.deps import CallerDep, EpisodeServiceDep
from experience_model.domain.caller import CallerStepQuery
from experience_model.domain.prompts import HistoryStep

router = APIRouter(prefix="/v1/transitions", tags=["transitions"])


@router.post(
    ":predict",
    response_model=PredictResponse,
    responses={code: {"model": ErrorResponse} for code in (422, 429, 503, 504)},
)
async def predict_transitions(
    request: Request, body: PredictRequest, service: EpisodeServiceDep, caller: CallerDep
) -> PredictResponse:
    """Predict next states for teacher-forced inputs (e.g. held-out real transitions).

    Retrieval acts as the caller's team. The queries go through the service's micro-batcher
    (shared batches, bounded queue: 429 when it has no room; deadline: 504), and a client that
    disconnects frees their work. Per-query parse failures are returned in that query's
    ``error``; the batch never fails as a whole because of one malformed completion.
    """
    queries = [
        CallerStepQuery(
            caller=caller,
            task=q.task,
            environment=q.environment,
            observation=q.observation,
            admissible_actions=q.admissible_actions,
            action=q.action,
            history=[HistoryStep(h.observation, h.action) for h in q.history],
            seed=q.seed,
        )
        for q in body.queries
    ]
    results = await cancel_on_disconnect(request, service.predict_many(queries))
    out = []
    for r in results:
        if isinstance(r, MalformedTransitionError):
            out.append(Prediction(error=r.to_response().error, attempts=r.attempts))
        elif isinstance(r, BaseException):
            raise r
        else:
            out.append(
                Prediction(
                    observation=r.observation,
                    admissible_actions=r.admissible_actions,
                    reward=r.reward,
                    terminated=r.terminated,
                    reasoning=r.reasoning,
                    attempts=r.attempts,
                )
            )
    return PredictResponse(predictions=out)
