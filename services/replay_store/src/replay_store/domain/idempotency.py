"""Idempotency keys of writes (pure part): request fingerprints and key validation.

A write sent with an ``Idempotency-Key`` header is stored per ``(team, key)`` with the
fingerprint of the request; a repeat with the same key and fingerprint gets the stored response
without a second write, the same key with another fingerprint is refused (422).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from dreamgym.errors import InvalidRequestError

__all__ = ["HEADER", "MAX_KEY_LENGTH", "request_fingerprint", "validate_key"]

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")  # visible ASCII, no spaces


def validate_key(key: str) -> str:
    """Return ``key`` when it is 1..255 visible ASCII characters.

    Raises:
        InvalidRequestError: otherwise (422 naming ``header.Idempotency-Key``).
    """
    if not _KEY.fullmatch(key):
        raise InvalidRequestError(
            f"{HEADER} must be 1..{MAX_KEY_LENGTH} visible ASCII characters without spaces",
            param=f"header.{HEADER}",
        )
    return key


def request_fingerprint(method: str, path: str, body: Any) -> str:
    """SHA-256 hex of the method, path and canonical JSON of the parsed body.

    Key order and whitespace of the original JSON do not matter; any value difference does.

    Args:
        method: HTTP method, e.g. ``"POST"``.
        path: request path, e.g. ``"/v1/trajectories"``.
        body: the parsed body as JSON-compatible data (``model_dump(mode="json")``).
    """
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{method.upper()} {path}\n{canonical}".encode()).hexdigest()
