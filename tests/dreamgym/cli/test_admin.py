"""``dreamgym admin`` against a real key registry (typer's CliRunner)."""

from __future__ import annotations

import json
import uuid

import pytest
from typer.testing import CliRunner

from dreamgym.cli.admin import resolve_database_url
from dreamgym.cli.main import app

pytestmark = pytest.mark.integration


@pytest.fixture()
def runner():
    return CliRunner()


@pytest.fixture()
def admin(runner, auth_database_url):
    """Run ``dreamgym admin <args>`` against the session's registry."""

    def invoke(*args: str):
        return runner.invoke(app, ["admin", *args, "--database-url", auth_database_url])

    return invoke


def test_create_team_key_list_and_revoke(admin, key_registry):
    team = f"lab-{uuid.uuid4().hex[:8]}"

    created = admin("create-team", team)
    issued = admin("create-key", team, "--label", "ci")
    key = issued.stdout.strip()
    listed = admin("list-keys", team, "--json")
    (record,) = json.loads(listed.stdout)
    revoked = admin("revoke-key", record["key_id"])
    after = json.loads(admin("list-keys", team, "--json").stdout)

    assert created.exit_code == issued.exit_code == listed.exit_code == revoked.exit_code == 0
    assert key.startswith(f"dg_{record['key_id']}_")  # stdout holds the key alone
    assert "shown only this once" in issued.stderr
    assert key_registry.authenticate(key) is None  # revoked
    assert (record["team"], record["label"], record["revoked_at"]) == (team, "ci", None)
    assert after[0]["revoked_at"] is not None
    assert key not in listed.stdout and key.split("_", 2)[2] not in listed.stdout


def test_created_key_authenticates_until_rotated(admin, key_registry):
    team = f"lab-{uuid.uuid4().hex[:8]}"
    admin("create-team", team)
    old = json.loads(admin("create-key", team, "--json").stdout)
    assert key_registry.authenticate(old["key"]).team == team

    rotated = admin("rotate-key", old["key_id"], "--json")
    new = json.loads(rotated.stdout)

    assert rotated.exit_code == 0
    assert key_registry.authenticate(old["key"]) is None
    assert key_registry.authenticate(new["key"]).team == team
    assert new["key_id"] != old["key_id"]


def test_list_keys_table_shows_ids_not_keys(admin):
    team = f"lab-{uuid.uuid4().hex[:8]}"
    admin("create-team", team)
    key = admin("create-key", team).stdout.strip()

    table = admin("list-keys", team)

    assert table.exit_code == 0
    assert key[3:19] in table.stdout and key not in table.stdout


def test_errors_exit_1_with_message(admin):
    team = f"lab-{uuid.uuid4().hex[:8]}"
    admin("create-team", team)

    duplicate = admin("create-team", team)
    exist_ok = admin("create-team", team, "--exist-ok")
    unknown_team = admin("create-key", "no-such-team-" + team)
    unknown_key = admin("revoke-key", "0" * 16)
    bad_name = admin("create-team", "Bad Name")

    assert (duplicate.exit_code, exist_ok.exit_code) == (1, 0)
    assert "already exists" in duplicate.stderr
    assert unknown_team.exit_code == 1 and "does not exist" in unknown_team.stderr
    assert unknown_key.exit_code == 1 and "does not exist" in unknown_key.stderr
    assert bad_name.exit_code == 1 and "team name" in bad_name.stderr


def test_database_url_from_environment(runner, auth_database_url, key_registry):
    team = f"lab-{uuid.uuid4().hex[:8]}"

    result = runner.invoke(
        app, ["admin", "create-team", team], env={"DREAMGYM_AUTH_DATABASE_URL": auth_database_url}
    )

    assert result.exit_code == 0
    assert team in [t.name for t in key_registry.list_teams()]


def test_database_url_defaults_to_the_local_stack_auth_database(tmp_path):
    (tmp_path / "stack.json").write_text(
        json.dumps({"config": {"host": "127.0.0.1", "postgres_port": 61234}})
    )

    url = resolve_database_url(None, tmp_path)

    assert url == "postgresql+psycopg://postgres@127.0.0.1:61234/auth"


def test_no_url_and_no_local_stack_is_a_usage_error(runner, tmp_path):
    result = runner.invoke(
        app,
        ["admin", "list-teams", "--data-dir", str(tmp_path)],
        env={"DREAMGYM_AUTH_DATABASE_URL": ""},
    )

    assert result.exit_code == 2
    assert "dreamgym up" in result.output
