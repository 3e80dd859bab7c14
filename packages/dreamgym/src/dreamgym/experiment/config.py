"""What ``dreamgym experiment`` runs: rows, environments (columns), seeds and the two presets.

Rows follow the paper's Table 1 (policy before RL, SFT on expert data, real-environment RL with a
budget B, DreamGym with 0 real interactions, DreamGym-S2R with ≤ B/10, for GRPO and PPO) and
Table 2 (ablations of DreamGym-GRPO without experience replay, reasoning or task generation).
Columns are environment ids (any registered real environment). Each cell is played with every
seed; the experience model is shared by every row and seed of an environment (trained once per
environment, seed ``seeds[0]``); a seed ``s`` sets the policy's init seed, the RL seed (task
sampling, sampling) and the evaluation sampling seed.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

__all__ = [
    "PRESETS",
    "ROWS",
    "ExperimentConfig",
    "RowSpec",
    "preset",
]


@dataclass(frozen=True)
class RowSpec:
    """One row of the experiment tables.

    Attributes:
        key: stable id (``experiment.json``, ``--rows``).
        label: the table's row label.
        table: ``"main"`` (Table 1) or ``"ablation"`` (Table 2).
        description: what the row measures (docs and ``experiment.md``).
    """

    key: str
    label: str
    table: Literal["main", "ablation"]
    description: str


ROWS: dict[str, RowSpec] = {
    r.key: r
    for r in (
        RowSpec(
            "before_rl",
            "Policy before RL",
            "main",
            "the initial policy (the checkpoint every RL row of this seed starts from)",
        ),
        RowSpec(
            "sft_expert",
            "SFT (expert data)",
            "main",
            "behaviour cloning of the initial policy on the real expert trajectories of the "
            "seed data (bc job); real interactions = expert transitions trained on",
        ),
        RowSpec(
            "real_grpo",
            "GRPO (real env)",
            "main",
            "GRPO with rollouts in the real environment on train games, budget B real steps",
        ),
        RowSpec(
            "dreamgym",
            "DreamGym (GRPO)",
            "main",
            "GRPO in the experience model only (0 real steps), curriculum and co-evolving replay",
        ),
        RowSpec(
            "dreamgym_s2r",
            "DreamGym-S2R (GRPO)",
            "main",
            "the DreamGym (GRPO) policy continued with GRPO in the real environment, ≤ B/10 "
            "real steps",
        ),
        RowSpec(
            "real_ppo",
            "PPO (real env)",
            "main",
            "PPO with rollouts in the real environment on train games, budget B real steps",
        ),
        RowSpec(
            "dreamgym_ppo",
            "DreamGym (PPO)",
            "main",
            "PPO in the experience model only (0 real steps)",
        ),
        RowSpec(
            "dreamgym_ppo_s2r",
            "DreamGym-S2R (PPO)",
            "main",
            "the DreamGym (PPO) policy and value head continued with PPO in the real "
            "environment, ≤ B/10 real steps",
        ),
        RowSpec(
            "no_replay",
            "w/o experience replay",
            "ablation",
            "DreamGym (GRPO) with an experience model trained and served without retrieved "
            "transitions, and no synthetic pushes to the replay buffer",
        ),
        RowSpec(
            "no_reasoning",
            "w/o experience reasoning",
            "ablation",
            "DreamGym (GRPO) with an experience model trained without reasoning traces (n/a "
            "while no stored transition carries one)",
        ),
        RowSpec(
            "no_curriculum",
            "w/o task generation",
            "ablation",
            "DreamGym (GRPO) with curriculum_every=0: seed tasks only",
        ),
    )
}


def _rl_small() -> dict[str, Any]:
    return {
        "iterations": 1,
        "tasks_per_iteration": 2,
        "group_size": 2,
        "learning_rate": 1e-3,
        "epochs_per_iteration": 1,
        "minibatch_size": 32,
        "curriculum_every": 1,
        "curriculum_seed_tasks": 1,
        "curriculum_variations": 1,
        "checkpoint_every": 1,
    }


def _rl_full() -> dict[str, Any]:
    return {
        "iterations": 10,
        "tasks_per_iteration": 8,
        "group_size": 8,
        "learning_rate": 1e-3,
        "epochs_per_iteration": 2,
        "minibatch_size": 128,
        "curriculum_every": 4,
        "curriculum_seed_tasks": 4,
        "curriculum_variations": 2,
        "checkpoint_every": 4,
    }


@dataclass(frozen=True, kw_only=True)
class ExperimentConfig:
    """Everything ``dreamgym experiment`` does.

    Attributes:
        environments: real environment ids, one table column each.
        seeds: seeds per cell (>= 1; the issue asks for >= 3).
        rows: row keys to run, in table order (subset of :data:`ROWS`).
        max_steps: episode step limit everywhere (seed data, RL, evaluation).
        train_seeds / eval_tasks / collect_policies: seed data (the ``collect`` job).
        em_base_model / em_steps / em_batch_size / em_learning_rate / retrieval_k /
            history_length: the experience model's SFT (shared by every row of an environment).
        fidelity_episodes: held-out real episodes for the experience model's own quality
            (0 = skip the ``fidelity`` job).
        policy_model: the policy spec every row starts from (``init_seed`` = the cell's seed).
        rl: GRPO/PPO hyperparameters of the imagined rows (job ``grpo``/``ppo`` sections).
        ppo: overrides of ``rl`` for the PPO rows (e.g. ``group_size``).
        real_rl: overrides of ``rl`` for the real-environment rows and S2R (``iterations`` is
            only an upper bound there: the budget ends the run).
        real_budget: B, real environment steps of the real-environment RL rows.
        s2r_budget: real steps of the S2R rows (``None`` = B // 10); at most B / 10.
        real_env_concurrency: real game instances played at once during real RL.
        bc: behaviour-cloning settings of the ``sft_expert`` row (job ``bc`` section).
        eval_episodes: held-out real games per cell and seed (the same games for every row).
        eval_concurrency: real game instances during evaluation.
        eval_greedy: evaluate greedily instead of sampling.
        device: torch device of every model (policy training and evaluation, experience-model
            SFT and serving, the task generator's model): ``"cpu"`` or ``"cuda"``.
        expected_runtime: what the preset is expected to take (documentation).
    """

    environments: tuple[str, ...] = ("twx-coin",)
    seeds: tuple[int, ...] = (0, 1, 2)
    rows: tuple[str, ...] = tuple(ROWS)
    max_steps: int = 10
    train_seeds: int = 120
    eval_tasks: int = 0
    collect_policies: tuple[str, ...] = ("expert", "random", "epsilon_greedy:0.3")
    em_base_model: str = "tiny:layers=4,hidden=256,heads=4,intermediate=768"
    em_steps: int = 250
    em_batch_size: int = 16
    em_learning_rate: float = 1e-3
    retrieval_k: int = 2
    history_length: int = 2
    fidelity_episodes: int = 60
    policy_model: str = "tiny:layers=2,hidden=128,heads=4,intermediate=512"
    rl: dict[str, Any] = field(default_factory=_rl_full)
    ppo: dict[str, Any] = field(default_factory=dict)
    real_rl: dict[str, Any] = field(default_factory=lambda: {"iterations": 1000})
    real_budget: int = 5000
    s2r_budget: int | None = None
    real_env_concurrency: int = 8
    bc: dict[str, Any] = field(
        default_factory=lambda: {"epochs": 3, "learning_rate": 1e-3, "minibatch_size": 64}
    )
    eval_episodes: int = 200
    eval_concurrency: int = 8
    eval_greedy: bool = False
    device: str = "cpu"
    expected_runtime: str = ""

    def __post_init__(self) -> None:
        unknown = [r for r in self.rows if r not in ROWS]
        if unknown:
            raise ValueError(f"unknown rows {unknown}; valid: {list(ROWS)}")
        if not self.environments:
            raise ValueError("environments must name at least one environment id")
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds must be distinct and non-empty, got {self.seeds}")
        if self.real_budget < 1:
            raise ValueError(f"real_budget must be >= 1, got {self.real_budget}")
        if self.s2r_budget is not None and not 1 <= 10 * self.s2r_budget <= self.real_budget:
            raise ValueError(
                f"s2r_budget must be >= 1 and at most real_budget / 10 = "
                f"{self.real_budget / 10:g}, got {self.s2r_budget}"
            )
        if self.real_budget // 10 < 1 and self.s2r_budget is None:
            raise ValueError("real_budget must be >= 10 so that B // 10 >= 1 (or set s2r_budget)")
        if self.eval_episodes < 1:
            raise ValueError(f"eval_episodes must be >= 1, got {self.eval_episodes}")
        needs = {"dreamgym_s2r": "dreamgym", "dreamgym_ppo_s2r": "dreamgym_ppo"}
        for row, source in needs.items():
            if row in self.rows and source not in self.rows:
                raise ValueError(f"row {row} continues the {source} policy: add {source} to rows")
        trained = set(self.rows) - {"before_rl", "sft_expert"}
        if "before_rl" in self.rows and not trained:
            raise ValueError("row before_rl evaluates the initial checkpoint of an RL row: add one")

    @property
    def s2r_steps(self) -> int:
        """Real steps of the S2R rows (≤ B / 10)."""
        return self.s2r_budget if self.s2r_budget is not None else self.real_budget // 10

    def ordered_rows(self) -> list[str]:
        """``rows`` in the canonical table order."""
        return [r for r in ROWS if r in self.rows]


PRESETS: dict[str, ExperimentConfig] = {
    # CI-sized: every row and job kind is exercised on 3 seeds; the numbers are not a result.
    # One real game at a time in real RL, so S2R's 12 real steps can finish whole episodes.
    "small": ExperimentConfig(
        max_steps=6,
        train_seeds=12,
        eval_tasks=4,
        em_base_model="tiny:layers=2,hidden=128,heads=4,intermediate=256",
        em_steps=120,
        em_learning_rate=2e-3,
        fidelity_episodes=2,
        policy_model="tiny:layers=1,hidden=64,heads=2,intermediate=128",
        rl=_rl_small(),
        real_rl={"iterations": 20},
        real_budget=120,
        real_env_concurrency=1,
        bc={"epochs": 1, "learning_rate": 1e-3, "minibatch_size": 32},
        eval_episodes=6,
        eval_concurrency=2,
        expected_runtime="about 20 minutes on a 2-core CPU machine shared with other work "
        "(see docs/experiments.md for a measured run)",
    ),
    # The paper's headline on one environment in about an hour on an idle 2-core CPU machine:
    # policy before RL, real-environment GRPO with B = 2500 real steps (about what 6 iterations
    # of 8×8 real rollouts take), DreamGym with 0 real steps, DreamGym-S2R with B/10 = 250,
    # 3 seeds, 100 held-out games per cell and seed. The experience model is the full preset's.
    "headline": ExperimentConfig(
        rows=("before_rl", "real_grpo", "dreamgym", "dreamgym_s2r"),
        rl={**_rl_full(), "iterations": 6, "curriculum_every": 3, "checkpoint_every": 3},
        real_budget=2500,
        eval_episodes=100,
        fidelity_episodes=30,
        expected_runtime="about an hour on an idle 2-core CPU machine (see docs/experiments.md)",
    ),
    # The documented setting (not run in CI): the demo's experience model and GRPO settings,
    # B = 5000 real steps for real-environment RL (about what 10 iterations of 8×8 real
    # rollouts take) and 500 for S2R, 200 held-out games per cell and seed.
    "full": ExperimentConfig(
        expected_runtime="an estimated 6-10 hours per environment on an idle 2-core CPU "
        "machine, under an hour per environment on one GPU with --device cuda (see "
        "docs/experiments.md)",
    ),
}


def preset(name: str, **overrides: Any) -> ExperimentConfig:
    """A preset with overrides (``None`` values are ignored).

    Raises:
        ValueError: unknown preset (lists the valid ones) or an invalid override.
    """
    if name not in PRESETS:
        raise ValueError(f"unknown preset '{name}'; valid: {sorted(PRESETS)}")
    return replace(PRESETS[name], **{k: v for k, v in overrides.items() if v is not None})
