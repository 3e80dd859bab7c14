"""The local stack hands every service the key registry (database ``auth``) and leaves
authentication off unless asked."""

from __future__ import annotations

from dreamgym.cli.admin import resolve_database_url
from dreamgym.stack.local import SERVICES, LocalStack, StackConfig


def test_every_service_gets_the_auth_database_url(tmp_path, monkeypatch):
    monkeypatch.setenv("DREAMGYM_AUTH_DATABASE_URL", "postgresql+psycopg://elsewhere/auth")
    stack = LocalStack(StackConfig(data_dir=tmp_path, postgres_port=61000))

    urls = {service: stack._env(service)["DREAMGYM_AUTH_DATABASE_URL"] for service in SERVICES}

    assert set(urls.values()) == {"postgresql+psycopg://postgres@127.0.0.1:61000/auth"}
    assert not any(
        stack._env(service).get(f"{service.upper()}_AUTH_ENABLED") for service in SERVICES
    )


def test_extra_env_enables_auth_per_service(tmp_path):
    config = StackConfig(data_dir=tmp_path, extra_env={"REPLAY_STORE_AUTH_ENABLED": "true"})

    env = LocalStack(config)._env("replay_store")

    assert env["REPLAY_STORE_AUTH_ENABLED"] == "true"


def test_admin_default_registry_is_the_stacks_auth_database(tmp_path):
    import json

    stack = LocalStack(StackConfig(data_dir=tmp_path, postgres_port=61001))
    (tmp_path / "stack.json").write_text(
        json.dumps({"config": {"host": "127.0.0.1", "postgres_port": 61001}})
    )

    assert (
        resolve_database_url(None, tmp_path)
        == stack._env("agent_trainer")["DREAMGYM_AUTH_DATABASE_URL"]
    )
