"""``Idempotency-Key`` handling of write routes (a dependency; storage in the adapter).

A write route takes :data:`IdempotencyDep` and wraps its work in :meth:`Idempotency.run`:

- no header: the write runs as usual;
- a new key: the write runs and its 2xx response is stored per team for
  ``REPLAY_STORE_IDEMPOTENCY_TTL_S`` seconds (a failed write frees the key);
- a repeat with the same key, path and body: the stored response, no second write;
- the same key with another path or body: 422 naming ``header.Idempotency-Key``;
- the same key while the first request still runs: 409.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar

from fastapi import Depends, Header, Request
from pydantic import BaseModel

from dreamgym.errors import BackendUnavailableError
from dreamgym.server.auth import TeamDep
from replay_store.adapters.idempotency import PostgresIdempotencyStore
from replay_store.domain.idempotency import request_fingerprint, validate_key

__all__ = ["Idempotency", "IdempotencyDep"]

_M = TypeVar("_M", bound=BaseModel)


class Idempotency:
    """The idempotency context of one request (``key`` is ``None`` without the header)."""

    def __init__(
        self, store: PostgresIdempotencyStore, team: str, key: str | None, method: str, path: str
    ) -> None:
        self.store = store
        self.team = team
        self.key = key
        self.method = method
        self.path = path

    def run(self, body: BaseModel, write: Callable[[], _M], model: type[_M]) -> _M:
        """Run ``write()`` once per key; repeats get the first response back.

        Blocking (database); call from a threadpool route (plain ``def``).

        Raises:
            IdempotencyKeyReusedError: the key was used with a different request (422).
            IdempotencyKeyInUseError: the first request with the key is still running (409).
        """
        if self.key is None:
            return write()
        fingerprint = request_fingerprint(self.method, self.path, body.model_dump(mode="json"))
        stored = self.store.begin(self.team, self.key, fingerprint)
        if stored is not None:
            return model.model_validate(stored.body)
        try:
            result = write()
        except BaseException:
            self.store.abandon(self.team, self.key)
            raise
        self.store.complete(self.team, self.key, 200, result.model_dump(mode="json"))
        return result


async def get_idempotency(
    request: Request,
    team: TeamDep,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> Idempotency:
    """The request's :class:`Idempotency` (validates the header).

    Raises:
        InvalidRequestError: a malformed key (422 naming ``header.Idempotency-Key``).
        BackendUnavailableError: the service has not started (503).
    """
    store: PostgresIdempotencyStore | None = getattr(request.app.state, "idempotency", None)
    if store is None:
        raise BackendUnavailableError("replay store is starting", retry_after_s=1.0)
    key = None if idempotency_key is None else validate_key(idempotency_key)
    return Idempotency(store, team, key, request.method, request.url.path)


IdempotencyDep = Annotated[Idempotency, Depends(get_idempotency)]
