"""TextWorld adapter: Coin Collector and Cooking games built offline and cached on disk.

Games are generated with TextWorld's own challenge generators (``textworld.challenges``, the same
code path as ``tw-make <challenge> --seed N``), compiled to Z-machine ``.z8`` files by the
Inform 7 compiler shipped in the wheel (1-6 s per game) and cached as::

    <cache_dir>/<challenge>/<params-hash>/<split>-<seed>.z8   (+ .json game metadata)

``cache_dir`` defaults to ``$DREAMGYM_TEXTWORLD_CACHE`` or ``~/.cache/dreamgym/textworld``;
``params-hash`` covers the challenge, its parameters and the TextWorld version. Builds write to a
temporary directory and are moved into place atomically, so concurrent builders are safe.

Environment ids and defaults (an expert episode fits well inside ``max_steps=20``):

- ``tw-coin_collector``: ``level=5``: a chain of 5 rooms, coin in the last one (expert: 5 moves).
- ``tw-cooking``: ``recipe=1, take=1, go=1`` (single kitchen, no doors), ``open/cook/cut/drop``
  off, ``recipe_seed=0`` (expert: take the ingredient, ``prepare meal``, ``eat meal``).

Splits: a game is identified by ``(split, seed)``. Eval games are generated from the seed
``seed + EVAL_SEED_OFFSET`` and, for Cooking, from TextWorld's ``test`` food split (train games
use its ``train`` food split), so an eval game never equals a train game even for equal integer
seeds. To rebuild an eval game by hand: ``tw-make tw-cooking --recipe 1 --take 1 --split test
--seed <seed + 2**31>`` (train: ``--split train --seed <seed>``).

Observation: the room description at reset, the action feedback after a step, both cleaned by
:func:`~dreamgym.envs.abstraction.normalise_textworld_text` (banner, headers, prompt and
end-of-game chrome removed) and mapped by :func:`~dreamgym.envs.abstraction.abstract_observation`.
Admissible actions are TextWorld's ``admissible_commands``, sorted, nothing dropped.
Expert: ``policy_commands``, TextWorld's walkthrough recomputed from the current state.

>>> env = TextWorldEnv("coin_collector", cache_dir="/tmp/tw")   # doctest: +SKIP
>>> state, info = env.reset(seed=0)                             # doctest: +SKIP
>>> env.expert_actions()                                        # doctest: +SKIP
['go west', 'go north', 'go east', 'go north', 'take coin']
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from dreamgym.envs.abstraction import abstract_observation, normalise_textworld_text
from dreamgym.envs.accounting import record_real_step
from dreamgym.envs.base import StepResult
from dreamgym.types import AbstractState

__all__ = [
    "DEFAULT_CACHE_DIR",
    "DEFAULT_MAX_STEPS",
    "DEFAULT_PARAMS",
    "ENVIRONMENT_IDS",
    "EVAL_SEED_OFFSET",
    "TextWorldEnv",
]

DEFAULT_PARAMS: dict[str, dict[str, int | bool]] = {
    "coin_collector": {"level": 5},
    "cooking": {
        "recipe": 1,
        "take": 1,
        "go": 1,
        "open": False,
        "cook": False,
        "cut": False,
        "drop": False,
        "recipe_seed": 0,
    },
}
DEFAULT_MAX_STEPS = 20
DEFAULT_CACHE_DIR = Path("~/.cache/dreamgym/textworld")
ENVIRONMENT_IDS: dict[str, str] = {f"tw-{name}": name for name in DEFAULT_PARAMS}
EVAL_SEED_OFFSET = 2**31
_FOOD_SPLITS = {"train": "train", "eval": "test"}


def _default_cache_dir() -> Path:
    return Path(os.environ.get("DREAMGYM_TEXTWORLD_CACHE", DEFAULT_CACHE_DIR)).expanduser()


def _generation_seed(seed: int, split: str) -> int:
    if not 0 <= seed < EVAL_SEED_OFFSET:
        raise ValueError(f"seed must be in [0, 2**31), got {seed}")
    return seed if split == "train" else seed + EVAL_SEED_OFFSET


def _request_infos() -> Any:
    import textworld

    return textworld.EnvInfos(
        admissible_commands=True,
        policy_commands=True,
        won=True,
        lost=True,
        objective=True,
        description=True,
        inventory=True,
        score=True,
        max_score=True,
    )


@contextlib.contextmanager
def _quiet_jericho() -> Iterator[None]:
    """Silence jericho's "game is not fully supported" warning for TextWorld-generated games.

    Its score/move/change detection is unused: TextWorld tracks score and won/lost itself.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*is not fully supported")
        yield


def _build_game(challenge: str, settings: dict[str, Any], seed: int, target: Path) -> None:
    """Generate and compile one game into ``target`` (.z8) and ``target.with_suffix('.json')``."""
    import textworld
    from textworld.challenges import CHALLENGES

    _, make_game, _ = CHALLENGES[f"tw-{challenge}"]
    target.parent.mkdir(parents=True, exist_ok=True)
    build_dir = Path(tempfile.mkdtemp(prefix=".build-", dir=target.parent))
    try:
        options = textworld.GameOptions()
        options.seeds = seed
        options.path = str(build_dir / "game.z8")
        options.file_ext = ".z8"
        with _quiet_jericho():  # the generator plays the walkthrough once to validate it
            game = make_game(settings=dict(settings), options=options)
            game_file = Path(textworld.generator.compile_game(game, options))
        os.replace(game_file.with_suffix(".json"), target.with_suffix(".json"))
        os.replace(game_file, target)
    finally:
        shutil.rmtree(build_dir, ignore_errors=True)


class TextWorldEnv:
    """A TextWorld challenge game behind the :class:`~dreamgym.envs.base.RealEnv` interface.

    Args:
        challenge: ``"coin_collector"`` or ``"cooking"``.
        max_steps: truncation limit in actions (default :data:`DEFAULT_MAX_STEPS`).
        cache_dir: root of the compiled-game cache (see the module docstring).
        **params: challenge settings overriding :data:`DEFAULT_PARAMS` (``level`` for Coin
            Collector; ``recipe``, ``take``, ``go``, ``open``, ``cook``, ``cut``, ``drop``,
            ``recipe_seed`` for Cooking, as in ``tw-make``).

    Attributes:
        environment_id: ``"tw-<challenge>"``.
        max_steps: truncation limit in actions.
        params: the effective challenge settings.
        cache_dir: the cache root.
        num_steps_total: real environment steps taken over this adapter's lifetime.

    Raises:
        ValueError: unknown challenge or parameter name, ``max_steps < 1``.

    >>> env = TextWorldEnv("cooking", max_steps=10, cache_dir="/tmp/tw")   # doctest: +SKIP
    >>> env.reset(seed=3)[0].task[:15]                                     # doctest: +SKIP
    'You are hungry!'
    """

    def __init__(
        self,
        challenge: str = "coin_collector",
        *,
        max_steps: int | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        **params: int | bool,
    ):
        if challenge not in DEFAULT_PARAMS:
            raise ValueError(
                f"unknown TextWorld challenge {challenge!r}; valid: {sorted(DEFAULT_PARAMS)}"
            )
        unknown = sorted(set(params) - set(DEFAULT_PARAMS[challenge]))
        if unknown:
            raise ValueError(
                f"unknown {challenge} parameters {unknown}; "
                f"valid: {sorted(DEFAULT_PARAMS[challenge])}"
            )
        self.challenge = challenge
        self.environment_id = f"tw-{challenge}"
        self.max_steps = DEFAULT_MAX_STEPS if max_steps is None else int(max_steps)
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        self.params: dict[str, int | bool] = {**DEFAULT_PARAMS[challenge], **params}
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else _default_cache_dir()
        self.num_steps_total = 0
        self._game: Any = None
        self._game_state: Any = None
        self._step = 0
        self._done = False

    # ------------------------------------------------------------------ games on disk

    @property
    def params_hash(self) -> str:
        """12 hex digits identifying (challenge, params, TextWorld version) in the cache path."""
        import textworld

        key = {
            "challenge": self.challenge,
            "params": self.params,
            "textworld": textworld.__version__,
        }
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]

    def game_path(self, seed: int, split: str = "train") -> Path:
        """Path of the compiled game for ``(split, seed)``, building it if not cached.

        Raises:
            ValueError: unknown split or seed outside ``[0, 2**31)``.
        """
        if split not in _FOOD_SPLITS:
            raise ValueError(f"split must be one of {sorted(_FOOD_SPLITS)}, got {split!r}")
        generation_seed = _generation_seed(int(seed), split)
        target = self.cache_dir / self.challenge / self.params_hash / f"{split}-{int(seed)}.z8"
        if not (target.is_file() and target.with_suffix(".json").is_file()):
            settings: dict[str, Any] = dict(self.params)
            if self.challenge == "cooking":
                settings["split"] = _FOOD_SPLITS[split]
            _build_game(self.challenge, settings, generation_seed, target)
        return target

    # ------------------------------------------------------------------ RealEnv interface

    def reset(self, seed: int, split: str = "train") -> tuple[AbstractState, dict[str, Any]]:
        """Load (building if needed) the game ``(split, seed)`` and return its initial state.

        Returns:
            ``(state, info)`` with ``info`` keys ``raw_observation`` (the room description),
            ``seed``, ``split``, ``game_file``, ``max_score`` and ``expert_plan_length``.

        Raises:
            ValueError: unknown split or seed outside ``[0, 2**31)``.
        """
        import textworld

        path = self.game_path(seed, split)
        self._close_game()
        with _quiet_jericho():
            self._game = textworld.start(str(path), request_infos=_request_infos())
            game_state = self._game.reset()
        self._game_state, self._step, self._done = game_state, 0, False
        raw = game_state["description"]
        info = {
            "raw_observation": raw,
            "seed": int(seed),
            "split": split,
            "game_file": str(path),
            "max_score": game_state["max_score"],
            "expert_plan_length": len(game_state["policy_commands"] or []),
        }
        return self._state(raw, game_state, terminated=False), info

    def step(self, action: str) -> StepResult:
        """Apply ``action`` (same reward/termination semantics as :class:`~.twx.TWXEnv`).

        Returns:
            A :class:`StepResult`; ``info`` holds ``raw_observation`` (feedback), ``native_reward``
            (TextWorld score delta), ``score``, ``max_score`` and ``lost``.

        Raises:
            RuntimeError: before :meth:`reset` or after the episode ended.
        """
        if self._game is None:
            raise RuntimeError(f"{self.environment_id}: call reset() before step()")
        if self._done:
            raise RuntimeError(f"{self.environment_id}: the episode has ended; call reset()")
        previous_score = self._game_state["score"]
        game_state, _, _ = self._game.step(action)
        self.num_steps_total += 1
        record_real_step()
        self._step += 1
        self._game_state = game_state
        won, lost = bool(game_state["won"]), bool(game_state["lost"])
        terminated = won or lost
        truncated = not terminated and self._step >= self.max_steps
        self._done = terminated or truncated
        info = {
            "raw_observation": game_state.feedback,
            "native_reward": float(game_state["score"] - previous_score),
            "score": float(game_state["score"]),
            "max_score": float(game_state["max_score"]),
            "lost": lost,
        }
        state = self._state(game_state.feedback, game_state, terminated=terminated)
        return StepResult(
            state=state,
            reward=1.0 if won else 0.0,
            terminated=terminated,
            truncated=truncated,
            won=won,
            info=info,
        )

    def expert_actions(self) -> list[str]:
        """TextWorld's walkthrough from the current state (``[]`` once the episode ended)."""
        if self._game_state is None or self._done:
            return []
        return list(self._game_state["policy_commands"] or [])

    def close(self) -> None:
        """Close the running game (the cache stays on disk)."""
        self._close_game()
        self._game_state = None

    def __enter__(self) -> TextWorldEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ helpers

    def _close_game(self) -> None:
        game, self._game = self._game, None
        if game is not None:
            game.close()

    def _state(self, raw: str, game_state: Any, *, terminated: bool) -> AbstractState:
        admissible = sorted(set(game_state["admissible_commands"] or []))
        observation = abstract_observation(normalise_textworld_text(raw), admissible)
        return AbstractState(
            task=" ".join(str(game_state["objective"]).split()),
            observation=observation,
            admissible_actions=[] if terminated else admissible,
            step=self._step,
        )
