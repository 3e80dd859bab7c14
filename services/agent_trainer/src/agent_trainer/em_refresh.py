"""Optional periodic refresh of the experience model on the grown replay buffer.

DreamGym's buffer co-evolves with the policy: imagined trajectories flow back into it tagged
``synthetic`` with the policy version that produced them (paper §2, §4.3). The paper keeps the
experience model itself frozen; as an option (``em_refresh_every > 0``), every N iterations the
trainer fine-tunes it on the grown buffer and swaps the new checkpoint in:

1. ``GET /v1/model`` — what is served (checkpoint, retrieval k, history, reasoning switches);
2. ``POST /v1/training-jobs`` — an SFT job on real *and* synthetic transitions
   (``data_source="any"``), continuing from the served checkpoint when it is a checkpoint
   directory, with the served prompt settings (so the new model matches the serving prompts) and
   the run's ``em_refresh_sft`` overrides;
3. poll ``GET /v1/training-jobs/{id}`` until it ends;
4. ``POST /v1/model:reload`` with the job's checkpoint.

A refresh that fails (job failed, timeout, service error) is logged and counted in the metrics;
RL continues on the model that is served.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from dreamgym.clients.experience_model import ExperienceModelClient
from dreamgym.errors import DreamGymError
from dreamgym.experience_types import ModelInfo
from dreamgym.jobs import FINAL_STATES

__all__ = [
    "ExperienceModelRefresher",
    "RestExperienceModelRefresher",
    "build_refresher",
    "is_checkpoint_path",
    "refresh_sft_config",
]

logger = logging.getLogger(__name__)

_MODEL_SPECS = ("tiny", "smollm2-135m")


class ExperienceModelRefresher(Protocol):
    """Retrains and reloads the experience model; returns metrics of the refresh."""

    def refresh(self, iteration: int) -> dict[str, float]: ...


def is_checkpoint_path(model_path: str) -> bool:
    """True for a checkpoint directory, False for a built-in model spec (``tiny[:…]``, …)."""
    return not (model_path in _MODEL_SPECS or model_path.startswith("tiny:"))


def refresh_sft_config(
    served: ModelInfo,
    *,
    replay_store_url: str,
    environment: str,
    output_dir: str,
    overrides: Mapping[str, Any],
) -> dict[str, Any]:
    """The SFT job config of one refresh.

    Args:
        served: ``GET /v1/model`` of the service to refresh.
        replay_store_url: the replay store holding the grown buffer.
        environment: only this environment's transitions.
        output_dir: where the new checkpoint is written.
        overrides: SFT fields set by the run (``steps``, ``learning_rate``, ``base_model`` ...);
            they win over everything derived here.

    Returns:
        ``data_source="any"`` (real + synthetic), the served prompt settings (retrieval k,
        history length, retrieval and reasoning switches) and, when the served model is a
        checkpoint directory, ``base_model`` = that checkpoint with its own tokenizer.
    """
    config: dict[str, Any] = {
        "replay_store_url": replay_store_url,
        "output_dir": output_dir,
        "environment": environment,
        "data_source": "any",
        "retrieval_k": served.retrieval_k,
        "history_length": served.history_length,
        "use_retrieval": served.use_retrieval,
        "use_reasoning": served.use_reasoning,
    }
    if is_checkpoint_path(served.model_path):
        config.update(base_model=served.model_path, tokenizer="base")
    return config | dict(overrides)


class RestExperienceModelRefresher:
    """Refresh through the experience-model service's REST API (see the module docstring).

    Args:
        client: a sync experience-model client.
        replay_store_url: the replay store the SFT job reads.
        environment: environment id of the run.
        output_root: new checkpoints go to ``output_root/iter-<NNNNN>``.
        overrides: SFT config fields of the run (``em_refresh_sft``).
        poll_s: seconds between job polls.
        timeout_s: give up waiting for a job after this long (the job keeps running).
        sleep / clock: injectable for tests.
    """

    def __init__(
        self,
        client: ExperienceModelClient,
        *,
        replay_store_url: str,
        environment: str,
        output_root: Path,
        overrides: Mapping[str, Any] | None = None,
        poll_s: float = 2.0,
        timeout_s: float = 3600.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.replay_store_url, self.environment = replay_store_url, environment
        self.output_root = Path(output_root)
        self.overrides = dict(overrides or {})
        self.poll_s, self.timeout_s = poll_s, timeout_s
        self.sleep, self.clock = sleep, clock
        self.refreshes = 0
        self.failures = 0
        self.history: list[dict[str, Any]] = []

    def refresh(self, iteration: int) -> dict[str, float]:
        """Train, wait, reload; ``experience_model/*`` metrics (failures counted, not raised)."""
        start = self.clock()
        try:
            checkpoint, result = self._train(iteration)
            self.client.reload(checkpoint)
        except (DreamGymError, RuntimeError, TimeoutError) as exc:
            self.failures += 1
            logger.warning("experience-model refresh at iteration %d failed: %s", iteration, exc)
            self.history.append({"iteration": iteration, "error": str(exc)})
            return {"experience_model/refresh_failures": float(self.failures)}
        self.refreshes += 1
        seconds = self.clock() - start
        self.history.append({"iteration": iteration, "checkpoint": checkpoint, "seconds": seconds})
        logger.info("experience model refreshed at iteration %d: %s", iteration, checkpoint)
        return {
            "experience_model/refreshes": float(self.refreshes),
            "experience_model/refresh_s": seconds,
            "experience_model/refresh_examples": float(result.get("examples", 0)),
        }

    def _train(self, iteration: int) -> tuple[str, dict[str, Any]]:
        config = refresh_sft_config(
            self.client.model_info(),
            replay_store_url=self.replay_store_url,
            environment=self.environment,
            output_dir=str(self.output_root / f"iter-{iteration:05d}"),
            overrides=self.overrides,
        )
        record = self.client.start_training(config)
        deadline = self.clock() + self.timeout_s
        while record.state not in FINAL_STATES:
            if self.clock() > deadline:
                raise TimeoutError(f"SFT job {record.job_id} still {record.state} after timeout")
            self.sleep(self.poll_s)
            record = self.client.get_training(record.job_id)
        result = record.result or {}
        if record.state != "succeeded" or not result.get("checkpoint"):
            raise RuntimeError(f"SFT job {record.job_id} {record.state}: {record.error or ''}")
        return str(result["checkpoint"]), dict(result)


def build_refresher(
    experience_model_url: str | None,
    replay_store_url: str | None,
    *,
    api_key: str | None,
    environment: str,
    every: int,
    overrides: Mapping[str, Any],
    run_dir: Path,
) -> RestExperienceModelRefresher | None:
    """The refresher of a training job with ``em_refresh_every > 0`` (``None`` when 0).

    Checkpoints go to ``run_dir/experience_model/iter-<NNNNN>`` (``output_dir`` in ``overrides``
    wins); the client sends ``api_key`` (the submitting team's).
    """
    if every == 0:
        return None
    return RestExperienceModelRefresher(
        ExperienceModelClient(experience_model_url or "", timeout_s=600, api_key=api_key),
        replay_store_url=replay_store_url or "",
        environment=environment,
        output_root=Path(run_dir) / "experience_model",
        overrides=overrides,
    )
