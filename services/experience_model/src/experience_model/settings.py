"""Deployment settings of the experience model (environment variables ``EXPERIENCE_MODEL_*``)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from dreamgym.auth.keys import validate_team_name
from dreamgym.server.auth import AuthSettings

__all__ = ["Settings", "get_settings"]


class Settings(AuthSettings):
    """Experience model settings (``auth_*`` from :class:`~dreamgym.server.auth.AuthSettings`).

    Attributes:
        backend: ``"transformers"`` (in-process model), ``"openai"`` (OpenAI-compatible server
            such as vLLM), ``"vllm"`` (vLLM's in-process async engine; GPU nodes with the
            ``vllm`` extra) or ``"fake"`` (echo backend for smoke runs without a model).
        model_path: model spec for the transformers backend: a checkpoint directory (e.g. one
            written by ``experience-model-train``), ``"smollm2-135m"`` or ``"tiny[:...]"``.
        device / dtype: torch device and optional dtype name (``"bfloat16"`` on GPUs).
        openai_base_url / openai_model / openai_api_key: the OpenAI-compatible endpoint.
        vllm_engine_args: extra ``vllm.AsyncEngineArgs`` fields for the ``vllm`` backend, as
            JSON (``{"gpu_memory_utilization": 0.85, "max_model_len": 4096}``).
        replay_store_url: replay store for top-k retrieval; unset disables retrieval.
        retrieval_k: retrieved transitions per step (k in paper Eq. 4).
        retrieval_source: retrieve only ``"real"`` transitions, only ``"synthetic"``, ``"any"``,
            or ``"mix"`` (a fixed share of each, see ``retrieval_synthetic_fraction``).
        retrieval_synthetic_fraction: under ``"mix"``, the share of the k examples taken from
            synthetic transitions (round(k·f)); a side with too few fills from the other.
        history_length: past (observation, action) pairs in the prompt (0 disables history).
        use_retrieval: ablation switch for retrieval ("w/o experience replay").
        use_reasoning: ablation switch for reasoning ("w/o experience reasoning"): ``False``
            marks prompts "no reasoning" and drops any trace the model emits; must match the
            SFT job's ``use_reasoning``. Per episode, a reset's ``options`` override these three
            switches and ``history_length``.
        max_new_tokens / temperature / top_p: sampling of the experience model.
        parse_retries: regenerations of an unparseable completion before a 502.
        episode_ttl_s: idle time after which a live episode expires.
        finished_episode_ttl_s: how long finished episodes stay readable.
        max_live_episodes: live episodes before resets answer 429 (all replicas together when
            episodes are in Redis).
        max_live_episodes_per_team: live episodes one team may have (``None``: no limit; all
            replicas together when episodes are in Redis); one more reset answers 429
            ``quota_exceeded`` with ``Retry-After``.
        max_active_jobs_per_team: queued + running training jobs one team may have (``None``:
            no limit); one more answers 429 ``quota_exceeded`` with ``Retry-After``.
        quota_retry_after_s: the ``Retry-After`` of those 429s, seconds.
        admin_teams: teams allowed operator actions (``/v1/model:reload``); a comma list in
            ``EXPERIENCE_MODEL_ADMIN_TEAMS``, default ``default`` (the single-user team).
        redis_url: Redis keeping the episodes (``redis://host:port/db``), so any replica serves
            any episode and episodes survive restarts; unset keeps them in this process.
        redis_key_prefix: namespace of the episode keys in that Redis database.
        default_max_steps / max_steps_limit: step limits of episodes.
        step_timeout_s: deadline of one step (504 after it).
        max_batch_size / max_batch_wait_ms / max_queue: dynamic batching bounds.
        batch_idle_ms: a batch closes early when no new step arrived for this long.
        batch_return_wait_fraction: a batch stays open for the episodes it just answered for up
            to this fraction of the last batch's duration (at least ``max_batch_wait_ms``);
            0 → only ``max_batch_wait_ms``.
        retrieval_cache_ttl_s: seconds a retrieval result is reused (0 disables the cache).
        data_dir: where SFT training jobs keep their records and checkpoints.
        job_backend: ``"local"`` (SFT in a child process of this service) or ``"celery"`` (on a
            ``gpu`` Celery worker, state in Redis; ``data_dir`` must be shared with the workers).
        celery_broker_url: Celery broker and job-state Redis (default: ``redis_url``).
    """

    model_config = SettingsConfigDict(
        env_prefix="EXPERIENCE_MODEL_", env_file=".env", extra="ignore", protected_namespaces=()
    )

    data_dir: Path = Path(".dreamgym/experience_model")
    host: str = "0.0.0.0"
    port: int = Field(default=8001, ge=1, le=65535)
    log_level: str = "INFO"
    json_logs: bool = True

    backend: Literal["transformers", "openai", "vllm", "fake"] = "transformers"
    model_path: str = "tiny"
    device: str = "cpu"
    dtype: str | None = None
    openai_base_url: str | None = None
    openai_model: str | None = None
    openai_api_key: str | None = None
    vllm_engine_args: dict[str, Any] = Field(default_factory=dict)

    replay_store_url: str | None = None
    retrieval_k: int = Field(default=2, ge=0, le=50)
    retrieval_source: Literal["real", "synthetic", "any", "mix"] = "real"
    retrieval_synthetic_fraction: float = Field(default=0.5, ge=0.0, le=1.0)
    history_length: int = Field(default=2, ge=0, le=64)
    use_retrieval: bool = True
    use_reasoning: bool = True

    max_new_tokens: int = Field(default=160, ge=1, le=8192)
    temperature: float = Field(default=0.7, ge=0.0, le=5.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    parse_retries: int = Field(default=2, ge=0, le=10)

    episode_ttl_s: float = Field(default=600.0, gt=0)
    finished_episode_ttl_s: float = Field(default=120.0, gt=0)
    max_live_episodes: int = Field(default=10_000, ge=1)
    max_live_episodes_per_team: int | None = Field(default=None, ge=1)
    max_active_jobs_per_team: int | None = Field(default=None, ge=1)
    quota_retry_after_s: float = Field(default=30.0, gt=0)
    admin_teams: Annotated[frozenset[str], NoDecode] = frozenset({"default"})
    redis_url: str | None = None
    redis_key_prefix: str = Field(default="dreamgym:experience_model", min_length=1)
    default_max_steps: int = Field(default=30, ge=1)
    max_steps_limit: int = Field(default=200, ge=1)
    step_timeout_s: float = Field(default=120.0, gt=0)

    max_batch_size: int = Field(default=64, ge=1, le=4096)
    max_batch_wait_ms: float = Field(default=20.0, ge=0.0, le=10_000.0)
    batch_idle_ms: float = Field(default=2.0, ge=0.0, le=10_000.0)
    batch_return_wait_fraction: float = Field(default=0.5, ge=0.0, le=10.0)
    retrieval_cache_ttl_s: float = Field(default=300.0, ge=0.0)
    max_queue: int = Field(default=4096, ge=1)

    job_backend: Literal["local", "celery"] = "local"
    celery_broker_url: str | None = None

    @property
    def job_broker_url(self) -> str | None:
        """Where Celery training jobs are queued and recorded."""
        return self.celery_broker_url or self.redis_url

    @field_validator("admin_teams", mode="before")
    @classmethod
    def _team_list(cls, value: Any) -> Any:
        if isinstance(value, str):
            value = [name.strip() for name in value.split(",") if name.strip()]
        return frozenset(validate_team_name(name) for name in value)

    @model_validator(mode="after")
    def _celery_needs_a_broker(self) -> Settings:
        if self.job_backend == "celery" and not self.job_broker_url:
            raise ValueError(
                "EXPERIENCE_MODEL_JOB_BACKEND=celery needs EXPERIENCE_MODEL_REDIS_URL or "
                "EXPERIENCE_MODEL_CELERY_BROKER_URL"
            )
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings read from the environment once per process."""
    return Settings()
