"""Trajectory export: JSONL and Parquet files with a versioned schema, loadable by ``datasets``.

One row per trajectory (schema ``dreamgym.trajectory/1``, :class:`TrajectoryRecord`)::

    schema_version  "dreamgym.trajectory/1"
    trajectory_id   str | null        replay-store id
    episode_id      str | null        experience-model episode id (imagined rollouts)
    task            {task_id, instruction, environment}
    turns           [{step, observation, admissible_actions, action, next_observation, reward,
                      terminated, truncated, won, reasoning,
                      prompt_token_ids, action_token_ids, action_logprobs, latency_ms}]
    rewards         [float]            r_1..r_T (= turns[*].reward)
    episode_return  float              sum of rewards
    length          int                T
    success         bool               the last turn is ``won``
    provenance      {environment, game_seed, split, policy, source, policy_version}
    timings         {created_at, exported_at, total_latency_ms}    UTC timestamps / ms

Token ids and log-probs are the policy's (prompt ids and the sampled action's ids and
per-token log-probs, nats), present when the producer had them (the trainer's rollouts) and
``null`` otherwise (trajectories read back from the replay store).

>>> with TrajectoryWriter("runs/export.parquet") as out:  # doctest: +SKIP
...     out.write(to_record(trajectory))
>>> datasets.load_dataset("parquet", data_files="runs/export.parquet")  # doctest: +SKIP

Parquet needs ``pyarrow`` (the ``export`` extra); the Arrow schema is :func:`arrow_schema`.
"""

from dreamgym.export.files import (
    ExportFormat,
    TrajectoryWriter,
    arrow_schema,
    export_from_replay_store,
    format_of,
    read_records,
)
from dreamgym.export.records import (
    SCHEMA_VERSION,
    TrajectoryRecord,
    TurnExtras,
    TurnRecord,
    to_record,
)

__all__ = [
    "SCHEMA_VERSION",
    "ExportFormat",
    "TrajectoryRecord",
    "TrajectoryWriter",
    "TurnExtras",
    "TurnRecord",
    "arrow_schema",
    "export_from_replay_store",
    "format_of",
    "read_records",
    "to_record",
]
