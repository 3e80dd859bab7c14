"""Deployment settings of the agent trainer (environment variables ``AGENT_TRAINER_*``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator
from pydantic_settings import SettingsConfigDict

from dreamgym.server.auth import AuthSettings

__all__ = ["Settings", "get_settings"]


class Settings(AuthSettings):
    """Agent trainer settings (``auth_*`` from :class:`~dreamgym.server.auth.AuthSettings`).

    Attributes:
        data_dir: job records, checkpoints and metrics live under ``<data_dir>/jobs``.
        experience_model_url / replay_store_url / task_generator_url: default service URLs
            given to jobs that do not name their own.
        max_running_jobs: jobs running at once with the local backend (more stay queued).
        job_backend: ``"local"`` (child processes of this service, state in ``data_dir``) or
            ``"celery"`` (Celery workers on queues ``gpu``/``cpu``, state in Redis; ``data_dir``
            must then be a path every worker sees).
        redis_url: the service's Redis.
        celery_broker_url: Celery broker and job-state Redis (default: ``redis_url``).
        max_active_jobs_per_team: queued + running jobs one team may have (``None``: no limit);
            one more is a 429 ``quota_exceeded`` with ``Retry-After``.
        quota_retry_after_s: the ``Retry-After`` of that 429, seconds.
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
    job_backend: Literal["local", "celery"] = "local"
    redis_url: str | None = None
    celery_broker_url: str | None = None
    max_active_jobs_per_team: int | None = Field(default=None, ge=1)
    quota_retry_after_s: float = Field(default=30.0, gt=0)

    @property
    def job_broker_url(self) -> str | None:
        """Where Celery jobs are queued and recorded."""
        return self.celery_broker_url or self.redis_url

    @model_validator(mode="after")
    def _celery_needs_a_broker(self) -> Settings:
        if self.job_backend == "celery" and not self.job_broker_url:
            raise ValueError(
                "AGENT_TRAINER_JOB_BACKEND=celery needs AGENT_TRAINER_REDIS_URL or "
                "AGENT_TRAINER_CELERY_BROKER_URL"
            )
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings read from the environment once per process."""
    return Settings()
