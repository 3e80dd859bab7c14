"""``bc`` job: behaviour cloning of the policy on the replay store's real expert trajectories.

The "SFT on expert data" row of the experiments (paper Table 1). Data: the stored real
transitions of ``bc.environment``'s train split whose behaviour policy is in
``bc.behaviour_policies`` (see :mod:`agent_trainer.behaviour_cloning`).
"""

from __future__ import annotations

import json
from typing import Any

from agent_trainer.behaviour_cloning import bc_examples, train_behaviour_cloning
from agent_trainer.jobs.schemas import BCJobConfig, bc_config
from agent_trainer.jobs.training import load_job_policy
from dreamgym.clients.replay_store import ReplayStoreClient
from dreamgym.jobs import JobContext

__all__ = ["run"]


def run(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Clone; returns the checkpoint, example counts, NLL before/after and the real data used.

    ``real_transitions_used`` counts the distinct real transitions trained on (the real
    interactions this row consumed; no environment is played).
    """
    job = BCJobConfig.model_validate(config)
    cfg = bc_config(config)
    run_dir = ctx.workdir / "run"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(cfg.to_dict(), indent=2))
    ctx.report(0.02, "reading expert trajectories from the replay store")
    with ReplayStoreClient(
        job.services.replay_store or "", timeout_s=300, api_key=job.services.api_key
    ) as replay:
        records = list(
            replay.iter_transitions(environment=cfg.environment, source="real", split="train")
        )
    examples = bc_examples(
        records,
        behaviour_policies=cfg.behaviour_policies,
        won_only=cfg.won_only,
        max_trajectories=cfg.max_trajectories,
    )
    policy, _ = load_job_policy(cfg.policy, run_dir, resume=False)

    def on_epoch(epoch: int, metrics: dict[str, float]) -> None:
        ctx.log_metrics(epoch, {"iteration": epoch, **metrics})
        ctx.report(
            progress=0.05 + 0.9 * (epoch + 1) / cfg.epochs,
            message=f"epoch {epoch + 1}/{cfg.epochs}: action NLL {metrics['bc/nll']:.3f}",
        )

    summary = train_behaviour_cloning(
        policy, examples, cfg, run_dir=run_dir, on_epoch=on_epoch, should_stop=ctx.cancelled
    )
    ctx.raise_if_cancelled()
    ctx.report(checkpoint=summary["checkpoint"])
    return {
        **summary,
        "final_checkpoint": summary["checkpoint"],
        "trajectories": len({e.trajectory_id for e in examples}),
        "real_transitions_used": len(examples),
        "real_env_steps": 0,  # no environment is played; the data were collected before
        "behaviour_policies": list(cfg.behaviour_policies),
    }
