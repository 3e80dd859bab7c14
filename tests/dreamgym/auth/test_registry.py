"""Integration tests of the key registry on a real PostgreSQL (dreamgym.auth.registry)."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import text

from dreamgym.auth.registry import KeyRegistry
from dreamgym.errors import (
    BackendUnavailableError,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
)

pytestmark = pytest.mark.integration


def _name(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_created_key_authenticates_as_its_team(key_registry):
    team = _name()
    key_registry.create_team(team)

    issued = key_registry.create_key(team, label="ci")

    owner = key_registry.authenticate(issued.key)
    assert (owner.team, owner.key_id) == (team, issued.info.key_id)
    assert (issued.info.label, issued.info.active) == ("ci", True)


def test_plaintext_key_is_never_stored(key_registry):
    team = _name()
    key_registry.create_team(team)
    issued = key_registry.create_key(team)
    secret = issued.key.split("_", 2)[2]

    with key_registry.engine.connect() as conn:
        row = conn.execute(
            text("SELECT * FROM api_keys WHERE key_id = :id"), {"id": issued.info.key_id}
        ).one()
        dump = conn.execute(text("SELECT string_agg(t::text, '|') FROM api_keys t")).scalar_one()

    assert issued.key not in dump and secret not in dump
    assert all(issued.key not in str(value) for value in row)
    assert row.key_hash != issued.key and len(row.key_hash) == 64


def test_unknown_malformed_and_tampered_keys_do_not_authenticate(key_registry):
    team = _name()
    key_registry.create_team(team)
    issued = key_registry.create_key(team)
    tampered = issued.key[:-1] + ("A" if issued.key[-1] != "A" else "B")
    other_id = "dg_" + "0" * 16 + issued.key[19:]

    assert key_registry.authenticate(tampered) is None
    assert key_registry.authenticate(other_id) is None
    assert key_registry.authenticate("not a key") is None


def test_revoked_key_stops_authenticating_and_keeps_its_record(key_registry):
    team = _name()
    key_registry.create_team(team)
    old = key_registry.create_key(team)
    new = key_registry.create_key(team)

    revoked = key_registry.revoke_key(old.info.key_id)
    again = key_registry.revoke_key(old.info.key_id)

    assert key_registry.authenticate(old.key) is None
    assert key_registry.authenticate(new.key).team == team
    assert revoked.revoked_at is not None and again.revoked_at == revoked.revoked_at
    assert [k.key_id for k in key_registry.list_keys(team)] == [old.info.key_id, new.info.key_id]
    assert [k.key_id for k in key_registry.list_keys(team, include_revoked=False)] == [
        new.info.key_id
    ]


def test_team_errors_name_the_field(key_registry):
    team = _name()
    key_registry.create_team(team)

    with pytest.raises(ConflictError, match="already exists"):
        key_registry.create_team(team)
    assert key_registry.create_team(team, exist_ok=True).name == team
    with pytest.raises(InvalidRequestError) as invalid:
        key_registry.create_team("Bad Name")
    with pytest.raises(NotFoundError) as missing:
        key_registry.create_key(_name("missing"))
    with pytest.raises(NotFoundError) as missing_key:
        key_registry.revoke_key("0" * 16)

    assert invalid.value.param == "name"
    assert missing.value.param == "team"
    assert missing_key.value.param == "key_id"
    assert team in [t.name for t in key_registry.list_teams()]


def test_create_schema_is_idempotent(key_registry):
    key_registry.create_schema()
    key_registry.create_schema()

    assert key_registry.list_teams() is not None


def test_unreachable_registry_is_backend_unavailable(postgres):
    registry = KeyRegistry.from_url(postgres.url("no_such_database"), pool_size=1)
    try:
        with pytest.raises(BackendUnavailableError):
            registry.authenticate("dg_" + "0" * 16 + "_" + "x" * 43)
    finally:
        registry.close()
