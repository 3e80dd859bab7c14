"""Start-up behaviour of create_app: settings validation, migrations, embedding width check."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError
from sqlalchemy import create_engine, text

from replay_store.adapters.migrate import MIGRATIONS_DIR
from replay_store.main import create_app
from replay_store.settings import Settings


def _head_revision() -> str:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return str(ScriptDirectory.from_config(config).get_current_head())


def test_settings_minilm_with_other_dim_is_rejected():
    with pytest.raises(ValidationError, match="embedding_dim must be 384"):
        Settings(embedding_model="minilm", embedding_dim=128)


def test_settings_read_from_prefixed_environment(monkeypatch):
    monkeypatch.setenv("REPLAY_STORE_MAX_K", "7")
    monkeypatch.setenv("REPLAY_STORE_EMBEDDING_MODEL", "hash")

    settings = Settings()

    assert (settings.max_k, settings.embedding_model) == (7, "hash")


@pytest.mark.integration
def test_create_app_migrates_empty_database_once_and_rejects_other_width(fresh_database):
    url = fresh_database(extensions=())
    settings = Settings(database_url=url, embedding_model="hash", embedding_dim=32, json_logs=False)
    with TestClient(create_app(settings)):
        pass
    with TestClient(create_app(settings)) as client:  # second start: already at head
        assert client.get("/readyz").status_code == 200

    other = create_app(settings.model_copy(update={"embedding_dim": 64}))
    mismatch = r"64-d vectors but transitions.embedding is vector\(32\)"
    with pytest.raises(RuntimeError, match=mismatch), TestClient(other):
        pass

    engine = create_engine(url)
    with engine.connect() as conn:
        version = conn.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
        indexes = conn.execute(
            text("SELECT indexdef FROM pg_indexes WHERE tablename = 'transitions'")
        ).scalars()
        assert version == _head_revision()
        assert any("hnsw" in d and "vector_cosine_ops" in d for d in indexes)
    engine.dispose()
