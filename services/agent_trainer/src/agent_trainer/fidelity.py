"""Fidelity of the experience model on held-out real transitions.

Real episodes are played on eval-split games (never in the replay buffer, so retrieval cannot
copy them) with a mix of behaviour policies; each real transition is then predicted by the
experience model from the *real* history (teacher forcing) through ``/v1/transitions:predict``.

Reported (the paper reports only an LLM-judge rubric and downstream success, §5.7; Theorem 1
says the reward error ε_R and the transition error ε_P are what matter):

- ``reward_accuracy`` — predicted reward equals the real one;
- ``success_reward_recall`` — of real winning steps, the fraction predicted with reward > 0
  (rewards are sparse, so plain accuracy alone would hide a model that never rewards);
- ``termination_accuracy`` — predicted ``terminated`` equals the real flag;
- ``next_observation_exact_match`` / ``admissible_actions_exact_match``;
- ``parse_failure_rate`` — predictions that stayed unparseable after the server's retries;
- ``judge`` (only with a ``judge``) — the paper's LLM-judge rubric on a sample of the predictions
  (:func:`agent_trainer.judge.judge_fidelity`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from dreamgym.clients.experience_model import ExperienceModelClient
from dreamgym.collect import collect
from dreamgym.envs import make_env
from dreamgym.envs.splits import seeds as split_seeds
from dreamgym.experience_types import HistoryEntry, Prediction, PredictQuery
from dreamgym.types import Trajectory, Transition

__all__ = ["Judge", "fidelity_metrics", "heldout_queries", "measure_fidelity"]

Judge = Callable[[list[PredictQuery], list[Prediction], list[Transition]], dict[str, Any]]
"""Scores ``(queries, predictions, labels)`` of a fidelity run (result: ``metrics["judge"]``)."""


def heldout_queries(
    trajectories: Sequence[Trajectory], environment: str
) -> tuple[list[PredictQuery], list[Any]]:
    """One teacher-forced query per real transition, with the transition as the label."""
    queries, labels = [], []
    for traj in trajectories:
        for i, tr in enumerate(traj.transitions):
            history = [
                HistoryEntry(observation=t.observation, action=t.action)
                for t in traj.transitions[:i]
            ]
            queries.append(
                PredictQuery(
                    task=traj.task,
                    environment=environment,
                    observation=tr.observation,
                    admissible_actions=tr.admissible_actions,
                    action=tr.action,
                    history=history,
                    seed=len(queries),
                )
            )
            labels.append(tr)
    return queries, labels


def fidelity_metrics(predictions: Sequence[Prediction], labels: Sequence[Any]) -> dict[str, Any]:
    """Compare predictions with the real transitions (see module docstring)."""
    n = len(labels)
    ok = [(p, t) for p, t in zip(predictions, labels, strict=True) if p.error is None]
    wins = [(p, t) for p, t in ok if t.reward > 0]
    real_wins = sum(1 for t in labels if t.reward > 0)
    return {
        "transitions": n,
        "parse_failure_rate": (n - len(ok)) / n if n else 0.0,
        "reward_accuracy": sum(abs((p.reward or 0.0) - t.reward) < 1e-6 for p, t in ok) / n,
        "success_reward_recall": (
            sum((p.reward or 0.0) > 0 for p, _ in wins) / real_wins if real_wins else None
        ),
        "termination_accuracy": sum(p.terminated == t.terminated for p, t in ok) / n,
        "next_observation_exact_match": sum(p.observation == t.next_observation for p, t in ok) / n,
        "admissible_actions_exact_match": sum(
            sorted(p.admissible_actions) == sorted(t.next_admissible_actions)
            for p, t in ok
            if not t.terminated
        )
        / max(1, sum(1 for _, t in ok if not t.terminated)),
        "real_winning_steps": real_wins,
    }


def measure_fidelity(
    client: ExperienceModelClient,
    *,
    environment: str,
    episodes: int,
    max_steps: int,
    policy_mix: dict[str, float] | None = None,
    first_seed_index: int = 500,
    seed: int = 0,
    chunk: int = 128,
    judge: Judge | None = None,
) -> dict[str, Any]:
    """Play held-out real episodes and score the experience model on their transitions.

    Args:
        client: experience-model client.
        environment: real environment id.
        episodes: held-out real episodes to play.
        max_steps: their step limit.
        policy_mix: behaviour policies (default: half random, half expert).
        first_seed_index: offset into the eval seeds (default keeps them apart from the seeds
            of the policy evaluation, though both are held out from training).
        seed: collection seed.
        chunk: predictions per request.
        judge: optional LLM judge of the predictions (see :data:`Judge`).

    Returns:
        The metrics of :func:`fidelity_metrics` plus ``real_steps`` used for measuring, and
        ``judge`` when a judge is given.
    """
    env = make_env(environment, max_steps=max_steps)
    try:
        trajectories = collect(
            env,
            split_seeds("eval", episodes, start=first_seed_index),
            policy_mix or {"random": 0.5, "expert": 0.5},
            rng_seed=seed,
            split="eval",
        )
    finally:
        env.close()
    queries, labels = heldout_queries(trajectories, environment)
    predictions: list[Prediction] = []
    for start in range(0, len(queries), chunk):
        predictions.extend(client.predict(queries[start : start + chunk]))
    metrics = fidelity_metrics(predictions, labels)
    metrics["real_steps"] = len(labels)
    if judge is not None:
        metrics["judge"] = judge(queries, predictions, labels)
    return metrics
