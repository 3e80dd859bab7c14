"""Deployment settings of the agent trainer (environment variables ``AGENT_TRAINER_*``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from dreamgym.server.auth import AuthSettings

__all__ = ["Settings", "get_settings"]


class Settings(AuthSettings):
    """Agent trainer settings (``auth_*`` from :class:`~dreamgym.server.auth.AuthSettings`).

    Attributes:
        data_dir: job records, checkpoints and metrics live under ``<data_dir>/jobs``.
        experience_model_url / replay_store_url / task_generator_url: default service URLs
            given to jobs that do not name their own.
        max_running_jobs: jobs running at once (more stay queued).
    """

    model_config = SettingsConfigDict(env_prefix="AGENT_TRAINER_", env_file=".env", extra="ignore")

    host: str = "0.0.0.0"
    port: int = Field(default=8004, ge=1, le=65535)
    log_level: str = "INFO"
    json_logs: bool = True

    data_dir: Path = Path(".dreamgym/agent_trainer")
    experience_model_url: str = "http://127.0.0.1:8001"
    replay_store_url: str = "http://127.0.0.1:8002"
    task_generator_url: str = "http://127.0.0.1:8003"
    max_running_jobs: int = Field(default=1, ge=1, le=64)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings read from the environment once per process."""
    return Settings()
