"""OpenEnv interface of the experience model, mounted at ``/openenv`` (see ``mount``).

The sub-application speaks ``openenv-core``'s HTTP/WebSocket protocol (``openenv-http/1.x``; wire
models in :mod:`dreamgym.openenv_types`), so ``GenericEnvClient("http://host:8001/openenv")``,
typed ``EnvClient`` subclasses (:mod:`dreamgym.clients.openenv`) and ``openenv validate --url``
work unchanged:

- ``POST /openenv/reset``, ``POST /openenv/step``, ``GET /openenv/state?episode_id=``
- ``GET /openenv/schema``, ``GET /openenv/metadata``, ``GET /openenv/health``, ``POST /openenv/mcp``
- ``WS /openenv/ws`` — one session (one live episode) per connection
- ``/openenv/docs`` and ``/openenv/openapi.json``

It shares the service's runtime (episode store, batcher, model), so OpenEnv episodes are batched
with ``/v1`` episodes and count against the same capacity and team quotas.

With ``EXPERIENCE_MODEL_AUTH_ENABLED`` the episode routes (``reset``, ``step``, ``state``, ``mcp``)
need a team's key like ``/v1`` (401 otherwise), and the WebSocket handshake must carry one
(``Authorization: Bearer <key>`` or ``X-API-Key``): without a valid key the socket is closed with
code 1008 (policy violation) after one error message. Episodes belong to the key's team, so an
OpenEnv episode is a ``/v1`` episode of that team and vice versa. ``health``, ``schema``,
``metadata`` and the docs stay open.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from dreamgym.errors import AuthenticationError, CapacityError, DreamGymError, ErrorResponse
from dreamgym.openenv_types import (
    OPENENV_API_VERSION,
    ExperienceModelAction,
    ExperienceModelObservation,
    ExperienceModelState,
    OpenEnvMetadata,
    OpenEnvResetRequest,
    OpenEnvResult,
    OpenEnvSchema,
    OpenEnvStepRequest,
    WSErrorCode,
)
from dreamgym.server import install_error_handlers
from dreamgym.server.auth import presented_api_key, require_team, team_of_headers
from experience_model import __version__
from experience_model.api.deps import CallerDep, EpisodeServiceDep
from experience_model.domain.caller import Caller
from experience_model.domain.openenv import (
    NoEpisodeError,
    OpenEnvSession,
    episode_state,
    observation_after_reset,
    observation_after_step,
    reset_episode,
)

__all__ = ["OPENENV_PATH", "mount", "router"]

OPENENV_PATH = "/openenv"
ENV_NAME = "dreamgym-experience-model"
DESCRIPTION = (
    "DreamGym's experience model as an OpenEnv environment: an LLM imagines the next "
    "observation, admissible actions, reward and termination of a text task (arXiv 2511.03773)."
)
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorResponse} for code in (401, 404, 409, 422, 429, 502, 503, 504)
}
WS_POLICY_VIOLATION = 1008
"""WebSocket close code of a handshake without a valid key (RFC 6455 §7.4.1)."""
WS_TRY_AGAIN_LATER = 1013
"""WebSocket close code while the model or the key registry is unavailable."""

router = APIRouter(tags=["openenv"])


@router.post("/reset", response_model=OpenEnvResult, responses=_ERRORS)
def reset(
    body: OpenEnvResetRequest, service: EpisodeServiceDep, caller: CallerDep
) -> OpenEnvResult:
    """Start an imagined episode of the caller's team; step it with ``observation.episode_id``."""
    return OpenEnvResult.of(observation_after_reset(reset_episode(service, body, caller.team)))


@router.post("/step", response_model=OpenEnvResult, responses=_ERRORS)
async def step(
    body: OpenEnvStepRequest, service: EpisodeServiceDep, caller: CallerDep
) -> OpenEnvResult:
    """Apply one action to the caller's team's episode named in the body."""
    outcome = await service.step(
        body.episode_id, body.action.text, seed=body.action.seed, caller=caller
    )
    return OpenEnvResult.of(observation_after_step(outcome))


@router.get("/state", response_model=ExperienceModelState, responses=_ERRORS)
def state(
    episode_id: Annotated[str, Query(min_length=1)], service: EpisodeServiceDep, caller: CallerDep
) -> ExperienceModelState:
    """The caller's team's episode's OpenEnv state."""
    return episode_state(service.get(episode_id, team=caller.team))


@router.get("/schema", response_model=OpenEnvSchema)
def schema() -> OpenEnvSchema:
    """JSON schemas of the action, observation and state."""
    return OpenEnvSchema(
        action=ExperienceModelAction.model_json_schema(),
        observation=ExperienceModelObservation.model_json_schema(),
        state=ExperienceModelState.model_json_schema(),
    )


@router.get("/metadata", response_model=OpenEnvMetadata)
def metadata() -> OpenEnvMetadata:
    """Name, description and version of this environment."""
    return OpenEnvMetadata(name=ENV_NAME, description=DESCRIPTION, version=__version__)


@router.get("/health")
def health(request: Request) -> JSONResponse:
    """``healthy`` once the model is loaded, else 503 ``unhealthy``."""
    loaded = getattr(request.app.state, "runtime", None) is not None
    return JSONResponse(
        status_code=200 if loaded else 503, content={"status": "healthy" if loaded else "unhealthy"}
    )


@router.post("/mcp", dependencies=[Depends(require_team)])
async def mcp(request: Request) -> dict[str, Any]:
    """JSON-RPC 2.0 endpoint of OpenEnv's production mode; this environment has no MCP tools."""
    try:
        body = await request.json()
    except ValueError:
        return _rpc_error(None, -32700, "Parse error")
    return mcp_response(body)


@router.websocket("/ws")
async def websocket_session(websocket: WebSocket) -> None:
    """One OpenEnv session: reset/step/state/close messages over one live episode.

    The handshake's key names the session's team; without a valid key (authentication enabled)
    the socket gets one ``SESSION_ERROR`` message (``status`` 401) and is closed with 1008.
    """
    await websocket.accept()
    try:
        caller = await run_in_threadpool(websocket_caller, websocket)
    except DreamGymError as exc:  # 401: no valid key; 503: the service or its registry is down
        await websocket.send_text(
            json.dumps(_ws_error("SESSION_ERROR", exc.message, **_error_fields(exc)))
        )
        unauthenticated = isinstance(exc, AuthenticationError)
        await websocket.close(code=WS_POLICY_VIOLATION if unauthenticated else WS_TRY_AGAIN_LATER)
        return
    runtime = getattr(websocket.app.state, "runtime", None)
    if runtime is None:
        error = _ws_error("SESSION_ERROR", "experience model is loading; retry", status=503)
        await websocket.send_text(json.dumps(error))
        await websocket.close(code=WS_TRY_AGAIN_LATER)
        return
    session = OpenEnvSession(runtime.episodes, caller)
    try:
        while (reply := await handle_message(session, await websocket.receive_text())) is not None:
            await websocket.send_text(json.dumps(reply))
        await websocket.close()
    except WebSocketDisconnect:
        pass
    finally:
        session.close()


def websocket_caller(websocket: WebSocket) -> Caller:
    """The caller of a WebSocket session, from its handshake headers (blocking: a registry
    lookup).

    Raises:
        AuthenticationError: authentication is enabled and the key is missing or invalid (401).
        BackendUnavailableError: the key registry is unreachable (503).
    """
    state = getattr(websocket.app.state, "team_auth", None)
    team = team_of_headers(state, websocket.headers)
    enabled = state is not None and state.enabled
    return Caller(team=team, api_key=presented_api_key(websocket.headers) if enabled else None)


def mcp_response(body: Any) -> dict[str, Any]:
    """Answer one JSON-RPC request: ``tools/list`` → no tools; anything else an error."""
    request_id = body.get("id") if isinstance(body, dict) else None
    if not isinstance(body, dict) or body.get("jsonrpc") != "2.0" or "method" not in body:
        return _rpc_error(request_id, -32600, "Invalid Request")
    if body["method"] == "tools/list":
        return {"jsonrpc": "2.0", "id": request_id, "result": {"tools": []}}
    return _rpc_error(request_id, -32601, f"Method not found: {body['method']}")


def _rpc_error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


async def handle_message(session: OpenEnvSession, raw: str) -> dict[str, Any] | None:
    """The reply to one WebSocket message, or ``None`` for ``close``; errors become replies."""
    try:
        message = json.loads(raw)
    except json.JSONDecodeError as exc:
        return _ws_error("INVALID_JSON", f"Invalid JSON: {exc}")
    kind = message.get("type") if isinstance(message, dict) else None
    try:
        if kind == "reset":
            request = OpenEnvResetRequest.model_validate(message.get("data") or {})
            return _observation_reply(session.reset(request))
        if kind == "step":
            action = ExperienceModelAction.model_validate(message.get("data") or {})
            return _observation_reply(await session.step(action))
        if kind == "state":
            return {"type": "state", "data": session.state().model_dump()}
        if kind == "close":
            return None
        return _ws_error("UNKNOWN_TYPE", f"Unknown message type: {kind}")
    except ValidationError as exc:
        return _ws_error("VALIDATION_ERROR", "Invalid message", errors=_errors(exc))
    except DreamGymError as exc:
        return _ws_error(_ws_code(exc), exc.message, **_error_fields(exc))


def _observation_reply(observation: ExperienceModelObservation) -> dict[str, Any]:
    return {"type": "observation", "data": OpenEnvResult.of(observation).model_dump()}


def _ws_code(exc: DreamGymError) -> WSErrorCode:
    if isinstance(exc, CapacityError):
        return "CAPACITY_REACHED"
    return "SESSION_ERROR" if isinstance(exc, NoEpisodeError) else "EXECUTION_ERROR"


def _error_fields(exc: DreamGymError) -> dict[str, Any]:
    return {"error_type": exc.error_type, "status": exc.status_code, "param": exc.param}


def _errors(exc: ValidationError) -> list[dict[str, Any]]:
    return [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]


def _ws_error(code: WSErrorCode, message: str, **fields: Any) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code, **fields}}


def mount(app: FastAPI, path: str = OPENENV_PATH) -> None:
    """Mount the OpenEnv sub-application on ``app`` at ``path``, sharing ``app.state``."""
    sub = FastAPI(
        title="DreamGym experience model (OpenEnv)",
        version=OPENENV_API_VERSION,
        description=DESCRIPTION,
    )
    sub.state = app.state
    install_error_handlers(sub)
    sub.include_router(router)
    app.mount(path, sub)
