"""Teams and API keys shared by every DreamGym service.

- :mod:`dreamgym.auth.keys` — key format, hashing and team names (pure);
- :mod:`dreamgym.auth.registry` — the PostgreSQL registry of teams and hashed keys (SQLAlchemy,
  optional extra ``dreamgym[auth]``);
- :mod:`dreamgym.auth.cache` — a short TTL cache of lookups for the services.

The FastAPI side (``require_team``, settings) is :mod:`dreamgym.server.auth`; the admin commands
are ``dreamgym admin`` (:mod:`dreamgym.cli.admin`). Only the pure key functions are imported here,
so importing :mod:`dreamgym.auth` needs no database driver.
"""

from dreamgym.auth.keys import (
    DEFAULT_TEAM,
    GeneratedKey,
    generate_key,
    hash_key,
    parse_key,
    validate_team_name,
    verify_key,
)

__all__ = [
    "DEFAULT_TEAM",
    "GeneratedKey",
    "generate_key",
    "hash_key",
    "parse_key",
    "validate_team_name",
    "verify_key",
]
