"""API keys and team names (pure functions, no I/O).

A key is ``dg_<key_id>_<secret>``:

- ``key_id``: 16 lowercase hex characters (64 random bits). It is stored in clear and is how a
  key is found, listed and revoked; it is not a secret.
- ``secret``: ``secrets.token_urlsafe(32)`` (256 random bits).

Only the SHA-256 digest of the whole key is stored. A plain (unsalted, fast) hash is enough here
because the secret is random with 256 bits of entropy, not a password: nobody can brute-force it,
and the lookup by ``key_id`` keeps a per-request check to one row and one constant-time compare.

>>> issued = generate_key()
>>> parse_key(issued.key) == issued.key_id
True
>>> verify_key(issued.key, issued.key_hash)
True
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

__all__ = [
    "DEFAULT_TEAM",
    "KEY_PREFIX",
    "TEAM_NAME_PATTERN",
    "GeneratedKey",
    "generate_key",
    "hash_key",
    "parse_key",
    "validate_team_name",
    "verify_key",
]

DEFAULT_TEAM = "default"
"""The team every request belongs to when a service runs with authentication disabled."""

KEY_PREFIX = "dg_"
TEAM_NAME_PATTERN = r"[a-z0-9][a-z0-9._-]{0,62}"

_KEY_ID_HEX = 16
_KEY_RE = re.compile(rf"{KEY_PREFIX}(?P<key_id>[0-9a-f]{{{_KEY_ID_HEX}}})_[A-Za-z0-9_-]{{20,200}}")
_TEAM_RE = re.compile(TEAM_NAME_PATTERN)


@dataclass(frozen=True)
class GeneratedKey:
    """A new key: the plaintext (shown once) and what is stored.

    Attributes:
        key_id: the public lookup id (16 hex characters).
        key: the full plaintext key ``dg_<key_id>_<secret>``; never stored.
        key_hash: SHA-256 hex digest (64 characters) of ``key``; what the registry stores.
    """

    key_id: str
    key: str
    key_hash: str


def hash_key(key: str) -> str:
    """SHA-256 hex digest (64 lowercase hex characters) of the UTF-8 encoded key."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def generate_key() -> GeneratedKey:
    """A fresh random key (``secrets``: 64-bit id, 256-bit secret) and its digest."""
    key_id = secrets.token_hex(_KEY_ID_HEX // 2)
    key = f"{KEY_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
    return GeneratedKey(key_id=key_id, key=key, key_hash=hash_key(key))


def parse_key(key: str) -> str | None:
    """The ``key_id`` of a well-formed key, or ``None`` when ``key`` cannot be a DreamGym key."""
    match = _KEY_RE.fullmatch(key)
    return match.group("key_id") if match else None


def verify_key(key: str, stored_hash: str) -> bool:
    """Whether ``key`` hashes to ``stored_hash``, compared in constant time."""
    return hmac.compare_digest(hash_key(key), stored_hash)


def validate_team_name(name: str) -> str:
    """Return ``name`` when it is a valid team name.

    A team name is 1-63 characters of lowercase letters, digits, ``.``, ``_`` and ``-``, starting
    with a letter or digit (it appears in logs, metrics labels and URLs).

    Raises:
        ValueError: the name does not match :data:`TEAM_NAME_PATTERN`.
    """
    if not _TEAM_RE.fullmatch(name):
        raise ValueError(
            f"team name {name!r} is invalid: use 1-63 characters of a-z, 0-9, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name
