"""ALFWorld adapters: household tasks generated as PDDL problems, and ALFWorld's official data.

Both adapters run ALFWorld's own text engine (the ``alfworld`` package: TextWorld's PDDL
environment with ALFWorld's ``alfred.pddl`` domain and ``alfred.twl2`` grammar, both bundled in
the wheel, and its ``AlfredDemangler`` naming objects ``apple 1``, ``cabinet 2``, ...). A game is a
``game.tw-pddl`` file (JSON: ``pddl_domain``, ``grammar`` with the task sentence,
``pddl_problem``, ``solvable``), exactly the format ``alfworld-generate`` writes next to each
official task.

:class:`AlfWorldEnv` (ids ``alfworld-pick``, ``alfworld-clean``, ``alfworld-heat``,
``alfworld-cool``) writes those files itself from a seed: a room (kitchen, living room, bedroom or
bathroom) with receptacles and objects drawn from ALFRED's classes, objects placed only where
ALFRED allows them (``alfworld.gen.constants.VAL_RECEPTACLE_OBJECTS``), and a goal taken from
ALFRED's goal library (``alfworld.gen.goal_library``) for one of its task types:

================== ================================== ================================ ==========
id                 ALFRED task type                   rooms                            max_steps
================== ================================== ================================ ==========
``alfworld-pick``  ``pick_and_place_simple``          all four                         20
``alfworld-clean`` ``pick_clean_then_place_in_recep`` kitchen, bathroom                25
``alfworld-heat``  ``pick_heat_then_place_in_recep``  kitchen                          25
``alfworld-cool``  ``pick_cool_then_place_in_recep``  kitchen                          25
================== ================================== ================================ ==========

Games are cached like TextWorld's (:mod:`dreamgym.envs.textworld_env`), one folder per game in
ALFWorld's official layout::

    <cache_dir>/<task>/<params-hash>/<split>-<seed>/{initial_state.pddl, traj_data.json,
                                                      game.tw-pddl}

``cache_dir`` defaults to ``$DREAMGYM_ALFWORLD_CACHE`` or ``~/.cache/dreamgym/alfworld``;
``params-hash`` covers the task, :data:`GENERATOR_VERSION` and the alfworld version. Writes are
atomic (temporary folder, then rename).

Splits: a scene's split is a function of its content: ``split_of_scene`` hashes the scene and puts
one in five into ``eval``. A game ``(split, seed)`` is the first scene drawn from the stream
seeded by ``(task, split, seed)`` whose hash bucket is ``split``, so no train game is ever an eval
game, whatever the seeds.

:class:`AlfWorldDataEnv` (id ``alfworld-official``) plays the official ALFWorld tasks when
``$ALFWORLD_DATA`` (or ``data_dir``; default ``~/.cache/alfworld`` as in ALFWorld) holds them
(``alfworld-download``)::

    $ALFWORLD_DATA/json_2.1.1/{train,valid_seen,valid_unseen}/<task folder>/<trial folder>/
        traj_data.json  initial_state.pddl  [game.tw-pddl]

``split="train"`` plays ``train``, ``split="eval"`` plays ``valid_unseen`` (ALFWorld's
out-of-distribution evaluation set, 134 games; ``eval_folder="valid_seen"`` for the other one); a
seed selects ``games[seed mod 1,000,000 mod n]`` of the sorted trial folders. A shipped
``game.tw-pddl`` is used as is (games marked unsolvable are skipped); otherwise one is built from
``initial_state.pddl`` and ``traj_data.json`` into the cache, never into the data folder. Folders
with movable receptacles or sliced objects are skipped, as ALFWorld does.

Observation: the engine's feedback (at reset the room description, with the ``-= Welcome ... =-``
banner and the ``Your task is to: ...`` sentence removed; the latter is the state's task).
Admissible actions: ALFWorld's ``admissible_commands`` without ``help`` (as in Verl-Agent),
sorted. Expert: the PDDL planner's plan (``policy_commands``) recomputed from the current state.
Reward: 1.0 on the step that satisfies the PDDL goal (``won``), else 0.0; ALFWorld games are
never lost.

>>> env = AlfWorldEnv("pick", cache_dir="/tmp/alfworld")        # doctest: +SKIP
>>> state, info = env.reset(seed=0)                              # doctest: +SKIP
>>> state.task                                                   # doctest: +SKIP
'put some cellphone on bed.'
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dreamgym.envs.abstraction import abstract_observation
from dreamgym.envs.accounting import record_real_step
from dreamgym.envs.base import StepResult
from dreamgym.envs.splits import SPLIT_SIZE
from dreamgym.types import AbstractState

__all__ = [
    "ALFWORLD_DEFAULT_DATA",
    "DATA_FOLDERS",
    "DEFAULT_CACHE_DIR",
    "DEFAULT_MAX_STEPS",
    "ENVIRONMENT_IDS",
    "GENERATOR_VERSION",
    "OFFICIAL_ENVIRONMENT_ID",
    "TASK_TYPES",
    "AlfWorldDataEnv",
    "AlfWorldEnv",
    "Scene",
    "generate_scene",
    "list_official_games",
    "scene_problem",
    "scene_traj_data",
    "split_of_scene",
    "write_game",
]

TASK_TYPES: dict[str, str] = {
    "pick": "pick_and_place_simple",
    "clean": "pick_clean_then_place_in_recep",
    "heat": "pick_heat_then_place_in_recep",
    "cool": "pick_cool_then_place_in_recep",
}
ENVIRONMENT_IDS: dict[str, str] = {f"alfworld-{task}": task for task in TASK_TYPES}
OFFICIAL_ENVIRONMENT_ID = "alfworld-official"
DEFAULT_MAX_STEPS: dict[str, int] = {"pick": 20, "clean": 25, "heat": 25, "cool": 25}
OFFICIAL_MAX_STEPS = 50  # ALFWorld's usual limit
DEFAULT_CACHE_DIR = Path("~/.cache/dreamgym/alfworld")
GENERATOR_VERSION = 1
DATA_FOLDERS: dict[str, str] = {"train": "train", "eval": "valid_unseen"}
ALFWORLD_DEFAULT_DATA = "~/.cache/alfworld"  # alfworld's own default for $ALFWORLD_DATA
_EVAL_BUCKETS = 5  # one scene in five is an eval scene

# Receptacle types per room with (min, max) instance counts, and the object classes of the room.
_ROOMS: dict[str, tuple[dict[str, tuple[int, int]], tuple[str, ...]]] = {
    "kitchen": (
        {
            "CounterTop": (1, 2),
            "Cabinet": (2, 4),
            "Drawer": (1, 3),
            "Fridge": (1, 1),
            "Microwave": (1, 1),
            "SinkBasin": (1, 1),
            "StoveBurner": (1, 2),
            "DiningTable": (0, 1),
            "Shelf": (0, 2),
            "GarbageCan": (1, 1),
            "CoffeeMachine": (1, 1),
        },
        (
            "Apple", "Bread", "Egg", "Potato", "Tomato", "Lettuce", "Mug", "Cup", "Bowl",
            "Plate", "Pan", "Pot", "Knife", "ButterKnife", "Fork", "Spoon", "Spatula", "Ladle",
            "DishSponge", "SoapBottle", "SaltShaker", "PepperShaker", "Kettle", "WineBottle",
        ),
    ),
    "livingroom": (
        {
            "Sofa": (1, 1),
            "ArmChair": (0, 1),
            "CoffeeTable": (1, 1),
            "SideTable": (1, 2),
            "Shelf": (0, 2),
            "Drawer": (1, 3),
            "Cabinet": (0, 2),
            "Dresser": (0, 1),
            "GarbageCan": (1, 1),
        },
        (
            "RemoteControl", "KeyChain", "CreditCard", "Book", "Newspaper", "Pillow", "Box",
            "Vase", "Statue", "Laptop", "Watch", "Pen", "Pencil", "CellPhone", "TissueBox",
        ),
    ),
    "bedroom": (
        {
            "Bed": (1, 1),
            "Desk": (1, 1),
            "Dresser": (0, 1),
            "Drawer": (1, 3),
            "Shelf": (0, 2),
            "SideTable": (1, 2),
            "GarbageCan": (1, 1),
            "LaundryHamper": (0, 1),
            "Safe": (0, 1),
        },
        (
            "AlarmClock", "Book", "CD", "CellPhone", "CreditCard", "KeyChain", "Laptop", "Pen",
            "Pencil", "Pillow", "Watch", "BasketBall", "BaseballBat", "TennisRacket", "Mug",
            "Cloth",
        ),
    ),
    "bathroom": (
        {
            "Toilet": (1, 1),
            "SinkBasin": (1, 2),
            "BathtubBasin": (0, 1),
            "CounterTop": (1, 1),
            "Cabinet": (1, 3),
            "Drawer": (0, 2),
            "GarbageCan": (1, 1),
            "TowelHolder": (0, 1),
            "HandTowelHolder": (0, 1),
            "ToiletPaperHanger": (1, 1),
            "Shelf": (0, 2),
        },
        (
            "SoapBar", "SoapBottle", "Candle", "Cloth", "SprayBottle", "ToiletPaper", "Towel",
            "HandTowel", "TissueBox", "DishSponge", "Plunger",
        ),
    ),
}  # fmt: skip
_TASK_ROOMS: dict[str, tuple[str, ...]] = {
    "pick": ("kitchen", "livingroom", "bedroom", "bathroom"),
    "clean": ("kitchen", "bathroom"),
    "heat": ("kitchen",),
    "cool": ("kitchen",),
}
# Object property required by the task (alfworld.gen.constants.VAL_ACTION_OBJECTS key) and the
# receptacle type that performs it (never the goal receptacle).
_TASK_ACTION: dict[str, tuple[str | None, str | None]] = {
    "pick": (None, None),
    "clean": ("Cleanable", "SinkBasin"),
    "heat": ("Heatable", "Microwave"),
    "cool": ("Coolable", "Fridge"),
}
_OPENABLE = frozenset({"Fridge", "Cabinet", "Microwave", "Drawer", "Safe", "Box"})
_RECEPTACLE_OBJECTS = frozenset({"Bowl", "Cup", "Mug", "Plate", "Pan", "Pot", "Box"})
_BASINS = frozenset({"SinkBasin", "BathtubBasin"})
_DISTRACTORS = (3, 6)
_TARGET_COPIES = (1, 2)
_MAX_DRAWS = 1000

_BANNER = "-= Welcome to TextWorld, ALFRED! =-"
_TASK_PREFIX = "Your task is to:"


# --------------------------------------------------------------------------- scene generation


@dataclass(frozen=True)
class Scene:
    """One generated household task (pure data; turned into PDDL by :func:`scene_problem`).

    Attributes:
        task: ``"pick"``, ``"clean"``, ``"heat"`` or ``"cool"``.
        room: ``"kitchen"``, ``"livingroom"``, ``"bedroom"`` or ``"bathroom"``.
        receptacles: receptacle classes, one entry per instance (``"Cabinet"`` twice = 2 cabinets).
        objects: ``(object class, index into receptacles)`` for every object instance.
        target_object: the object class of the goal.
        target_receptacle: the receptacle class of the goal.
        description: the task sentence (an ALFRED goal template, filled in).
    """

    task: str
    room: str
    receptacles: tuple[str, ...]
    objects: tuple[tuple[str, int], ...]
    target_object: str
    target_receptacle: str
    description: str


def _constants() -> tuple[dict[str, set[str]], dict[str, set[str]], dict[str, Any]]:
    import alfworld.gen.constants as constants
    import alfworld.gen.goal_library as goal_library

    return constants.VAL_RECEPTACLE_OBJECTS, constants.VAL_ACTION_OBJECTS, goal_library.gdict


def split_of_scene(scene: Scene) -> str:
    """``"eval"`` for one scene in five (by content hash), else ``"train"``."""
    digest = hashlib.sha256(json.dumps(asdict(scene), sort_keys=True).encode()).digest()
    return "eval" if int.from_bytes(digest[:8], "big") % _EVAL_BUCKETS == 0 else "train"


def _draw_scene(task: str, rng: random.Random) -> Scene | None:
    """One random scene for ``task``, or ``None`` when the draw admits no goal."""
    containers, actions, goals = _constants()
    room = rng.choice(_TASK_ROOMS[task])
    receptacle_counts, object_pool = _ROOMS[room]
    receptacles = tuple(
        kind
        for kind, (low, high) in sorted(receptacle_counts.items())
        for _ in range(rng.randint(low, high))
    )
    required, tool = _TASK_ACTION[task]
    fits = {obj: [i for i, r in enumerate(receptacles) if obj in containers.get(r, ())]
            for obj in object_pool}  # fmt: skip
    goal_pairs = [
        (obj, kind)
        for obj in object_pool
        if required is None or obj in actions[required]
        for kind in sorted(set(receptacles))
        if kind != tool and (task == "pick" or kind not in _BASINS)
        if obj in containers.get(kind, ())
        and any(receptacles[i] != kind for i in fits[obj])  # somewhere else to start from
    ]
    if not goal_pairs:
        return None
    target_object, target_receptacle = rng.choice(goal_pairs)
    starts = [i for i in fits[target_object] if receptacles[i] != target_receptacle]
    objects = [(target_object, rng.choice(starts)) for _ in range(rng.randint(*_TARGET_COPIES))]
    others = [o for o in object_pool if o != target_object and fits[o]]
    for obj in rng.sample(others, min(len(others), rng.randint(*_DISTRACTORS))):
        objects.append((obj, rng.choice(fits[obj])))
    template = rng.choice(goals[TASK_TYPES[task]]["templates"])
    description = template.format(
        obj=target_object.lower(), recep=target_receptacle.lower(), toggle="", mrecep=""
    )
    return Scene(
        task=task,
        room=room,
        receptacles=receptacles,
        objects=tuple(sorted(objects)),
        target_object=target_object,
        target_receptacle=target_receptacle,
        description=description,
    )


def generate_scene(task: str, split: str, seed: int) -> Scene:
    """The scene of game ``(split, seed)`` for ``task`` (deterministic).

    Raises:
        ValueError: unknown task or split.
    """
    if task not in TASK_TYPES:
        raise ValueError(f"unknown ALFWorld task {task!r}; valid: {sorted(TASK_TYPES)}")
    if split not in ("train", "eval"):
        raise ValueError(f"split must be one of ['eval', 'train'], got {split!r}")
    rng = random.Random(f"alfworld|{GENERATOR_VERSION}|{task}|{split}|{int(seed)}")
    for _ in range(_MAX_DRAWS):
        scene = _draw_scene(task, rng)
        if scene is not None and split_of_scene(scene) == split:
            return scene
    raise RuntimeError(f"no {split} scene for {task} seed {seed} in {_MAX_DRAWS} draws")


def _coordinate(value: int) -> str:
    return f"_plus_{value:02d}_dot_00" if value >= 0 else f"_minus_{-value:02d}_dot_00"


def _entity_id(kind: str, index: int) -> str:
    """ALFRED-style id (``Apple|+01.00|+00.90|+02.00``, mangled) that ALFWorld demangles."""
    coords = "_bar_".join(_coordinate(v) for v in (index, 1, 2 + index % 3))
    if kind in _BASINS:  # ALFRED: Sink|x|y|z|SinkBasin -> "sinkbasin 1"
        return f"{kind.removesuffix('Basin')}_bar_{coords}_bar_{kind}"
    return f"{kind}_bar_{coords}"


def _location_id(index: int) -> str:
    return f"loc_bar_{index}_bar_{index % 4}_bar_{index % 3}_bar_30"


def scene_problem(scene: Scene) -> str:
    """The PDDL problem (ALFRED's ``initial_state.pddl`` format) of ``scene``."""
    containers, actions, goals = _constants()
    receptacle_ids = [_entity_id(kind, i) for i, kind in enumerate(scene.receptacles)]
    object_ids = [_entity_id(kind, 100 + i) for i, (kind, _) in enumerate(scene.objects)]
    object_kinds = sorted({kind for kind, _ in scene.objects})
    receptacle_kinds = sorted(set(scene.receptacles))
    start = _location_id(0)
    declarations = ["agent1 - agent", f"{start} - location"]
    declarations += [f"{kind}Type - otype" for kind in object_kinds]
    declarations += [f"{kind}Type - rtype" for kind in receptacle_kinds]
    declarations += [f"{oid} - object" for oid in object_ids]
    declarations += [f"{rid} - receptacle" for rid in receptacle_ids]
    declarations += [f"{_location_id(i + 1)} - location" for i in range(len(receptacle_ids))]
    facts = [f"(atLocation agent1 {start})"]
    for i, (kind, rid) in enumerate(zip(scene.receptacles, receptacle_ids, strict=True)):
        facts.append(f"(receptacleType {rid} {kind}Type)")
        facts.append(f"(receptacleAtLocation {rid} {_location_id(i + 1)})")
        if kind in _OPENABLE:
            facts.append(f"(openable {rid})")
    for (kind, where), oid in zip(scene.objects, object_ids, strict=True):
        facts.append(f"(objectType {oid} {kind}Type)")
        facts.append(f"(pickupable {oid})")
        facts.append(f"(inReceptacle {oid} {receptacle_ids[where]})")
        facts.append(f"(wasInReceptacle {oid} {receptacle_ids[where]})")
        facts.append(f"(objectAtLocation {oid} {_location_id(where + 1)})")
        if kind in _RECEPTACLE_OBJECTS:
            facts.append(f"(isReceptacleObject {oid})")
        for prop, predicate in (
            ("Cleanable", "cleanable"),
            ("Heatable", "heatable"),
            ("Coolable", "coolable"),
        ):
            if kind in actions[prop]:
                facts.append(f"({predicate} {oid})")
    for rkind in receptacle_kinds:
        for okind in object_kinds:
            if okind in containers.get(rkind, ()):
                facts.append(f"(canContain {rkind}Type {okind}Type)")
    goal = goals[TASK_TYPES[scene.task]]["pddl"].format(
        obj=scene.target_object, recep=scene.target_receptacle, toggle="", mrecep=""
    )
    goal = goal.replace("#", "-").strip()
    if goal.endswith(")"):  # the library's goals also close the (define ...)
        goal = goal[:-1].rstrip()
    body = "\n".join(
        [
            "(define (problem dreamgym_alfworld)",
            "(:domain alfred)",
            "(:objects",
            *declarations,
            ")",
            "(:init",
            *facts,
            ")",
            goal,
            ")",
        ]
    )
    return body + "\n"


def scene_traj_data(scene: Scene) -> dict[str, Any]:
    """The ``traj_data.json`` fields ALFWorld reads (task type, PDDL parameters, annotation)."""
    return {
        "task_type": TASK_TYPES[scene.task],
        "pddl_params": {
            "object_target": scene.target_object,
            "parent_target": scene.target_receptacle,
            "toggle_target": "",
            "mrecep_target": "",
            "object_sliced": False,
        },
        "scene": {"room": scene.room, "generator": "dreamgym", "version": GENERATOR_VERSION},
        "turk_annotations": {"anns": [{"task_desc": scene.description}]},
    }


def _game_logic(task_description: str) -> dict[str, str]:
    from alfworld.info import ALFRED_PDDL_PATH, ALFRED_TWL2_PATH

    grammar = Path(ALFRED_TWL2_PATH).read_text().replace("UNKNOWN GOAL", task_description)
    return {"pddl_domain": Path(ALFRED_PDDL_PATH).read_text(), "grammar": grammar}


def _templated_description(traj_data: dict[str, Any], rng: random.Random) -> str:
    """ALFWorld's templated goal sentence, drawn with ``rng`` (ALFWorld's own helper uses the
    global ``random`` module)."""
    *_, goals = _constants()
    params = traj_data["pddl_params"]
    task_type = traj_data["task_type"] + ("_slice" if params.get("object_sliced") else "")
    template = rng.choice(goals[task_type]["templates"])
    return str(
        template.format(
            obj=str(params.get("object_target", "")).lower(),
            recep=str(params.get("parent_target", "")).lower(),
            toggle=str(params.get("toggle_target", "")).lower(),
            mrecep=str(params.get("mrecep_target", "")).lower(),
        )
    )


def write_game(target_dir: Path, problem: str, traj_data: dict[str, Any], description: str) -> Path:
    """Write ``initial_state.pddl``, ``traj_data.json`` and ``game.tw-pddl`` atomically.

    Returns:
        The path of ``game.tw-pddl`` inside ``target_dir``.
    """
    target_dir.parent.mkdir(parents=True, exist_ok=True)
    build = Path(tempfile.mkdtemp(prefix=".build-", dir=target_dir.parent))
    try:
        (build / "initial_state.pddl").write_text(problem)
        (build / "traj_data.json").write_text(json.dumps(traj_data, indent=1, sort_keys=True))
        game = {**_game_logic(description), "pddl_problem": problem, "solvable": True}
        (build / "game.tw-pddl").write_text(json.dumps(game))
        try:
            os.replace(build, target_dir)
        except OSError:  # another builder won the race (target exists and is not empty)
            if not (target_dir / "game.tw-pddl").is_file():
                raise
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return target_dir / "game.tw-pddl"


# --------------------------------------------------------------------------- the engine


def _request_infos() -> Any:
    import textworld

    return textworld.EnvInfos(
        admissible_commands=True, policy_commands=True, won=True, extras=["gamefile"]
    )


def _start_game(game_file: Path) -> Any:
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos
    from textworld.envs import PddlEnv

    env = AlfredInfos(AlfredDemangler(PddlEnv(_request_infos()), shuffle=False))
    env.load(str(game_file))
    return env


def _split_intro(raw: str) -> tuple[str, str]:
    """``(observation, task)`` from the reset text (banner dropped, task sentence split off)."""
    text = raw.replace(_BANNER, "").strip()
    head, sep, task = text.partition(_TASK_PREFIX)
    return head.strip(), " ".join(task.split()) if sep else ""


class _AlfredGames:
    """Shared episode logic of the two ALFWorld adapters (engine, state, step, expert)."""

    environment_id: str
    max_steps: int

    def _init_engine(self) -> None:
        self.num_steps_total = 0
        self._game: Any = None
        self._game_file: Path | None = None
        self._game_state: Any = None
        self._task = ""
        self._step = 0
        self._done = False

    def _play(self, game_file: Path, seed: int, split: str) -> tuple[AbstractState, dict[str, Any]]:
        if self._game is None or self._game_file != game_file:
            self._close_game()
            self._game = _start_game(game_file)
            self._game_file = game_file
        game_state = self._game.reset()
        raw = str(game_state.feedback)
        observation, task = _split_intro(raw)
        self._task = task or "Complete the household task."
        self._game_state, self._step, self._done = game_state, 0, False
        info = {
            "raw_observation": raw,
            "seed": int(seed),
            "split": split,
            "game_file": str(game_file),
            "expert_plan_length": len(game_state["policy_commands"] or []),
        }
        return self._state(observation, game_state, terminated=False), info

    def step(self, action: str) -> StepResult:
        """Apply ``action`` (unknown commands cost a step: ``Nothing happens.``).

        Returns:
            A :class:`StepResult`: reward 1.0 on the step that satisfies the goal, else 0.0;
            ``info`` holds ``raw_observation``, ``native_reward`` (the engine's 0/1 score delta)
            and ``lost`` (always ``False``).

        Raises:
            RuntimeError: before ``reset`` or after the episode ended.
        """
        if self._game is None or self._game_state is None:
            raise RuntimeError(f"{self.environment_id}: call reset() before step()")
        if self._done:
            raise RuntimeError(f"{self.environment_id}: the episode has ended; call reset()")
        game_state, native_reward, _ = self._game.step(action)
        self.num_steps_total += 1
        record_real_step()
        self._step += 1
        self._game_state = game_state
        won = bool(game_state["won"])
        truncated = not won and self._step >= self.max_steps
        self._done = won or truncated
        raw = str(game_state.feedback)
        return StepResult(
            state=self._state(raw, game_state, terminated=won),
            reward=1.0 if won else 0.0,
            terminated=won,
            truncated=truncated,
            won=won,
            info={"raw_observation": raw, "native_reward": float(native_reward), "lost": False},
        )

    def expert_actions(self) -> list[str]:
        """The PDDL planner's plan from the current state (``[]`` once the episode ended)."""
        if self._game_state is None or self._done:
            return []
        return list(self._game_state["policy_commands"] or [])

    def close(self) -> None:
        """Close the running game (the cache stays on disk)."""
        self._close_game()
        self._game_state = None

    def _close_game(self) -> None:
        game, self._game, self._game_file = self._game, None, None
        if game is not None:
            with contextlib.suppress(Exception):
                game.close()

    def _state(self, raw: str, game_state: Any, *, terminated: bool) -> AbstractState:
        admissible = sorted(set(game_state["admissible_commands"] or []) - {"help"})
        return AbstractState(
            task=self._task,
            observation=abstract_observation(raw, admissible),
            admissible_actions=[] if terminated else admissible,
            step=self._step,
        )


def _default_cache_dir() -> Path:
    return Path(os.environ.get("DREAMGYM_ALFWORLD_CACHE", DEFAULT_CACHE_DIR)).expanduser()


class AlfWorldEnv(_AlfredGames):
    """Generated ALFWorld household tasks behind the :class:`~dreamgym.envs.base.RealEnv`
    interface (module docstring).

    Args:
        task: ``"pick"``, ``"clean"``, ``"heat"`` or ``"cool"``.
        max_steps: truncation limit in actions (default :data:`DEFAULT_MAX_STEPS`).
        cache_dir: root of the game cache.

    Attributes:
        environment_id: ``"alfworld-<task>"``.
        max_steps: truncation limit in actions.
        cache_dir: the cache root.
        num_steps_total: real environment steps over this adapter's lifetime.

    Raises:
        ValueError: unknown task or ``max_steps < 1``.
    """

    def __init__(
        self,
        task: str = "pick",
        *,
        max_steps: int | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
    ):
        if task not in TASK_TYPES:
            raise ValueError(f"unknown ALFWorld task {task!r}; valid: {sorted(TASK_TYPES)}")
        self.task = task
        self.environment_id = f"alfworld-{task}"
        self.max_steps = DEFAULT_MAX_STEPS[task] if max_steps is None else int(max_steps)
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else _default_cache_dir()
        self._init_engine()

    @property
    def params_hash(self) -> str:
        """12 hex digits identifying (task, generator version, alfworld version)."""
        from alfworld.info import __version__ as alfworld_version

        key = {"task": self.task, "generator": GENERATOR_VERSION, "alfworld": alfworld_version}
        return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]

    def game_path(self, seed: int, split: str = "train") -> Path:
        """Path of ``game.tw-pddl`` for ``(split, seed)``, writing the game if not cached.

        Raises:
            ValueError: unknown split.
        """
        scene = generate_scene(self.task, split, int(seed))
        folder = self.cache_dir / self.task / self.params_hash / f"{split}-{int(seed)}"
        game_file = folder / "game.tw-pddl"
        if not game_file.is_file():
            write_game(folder, scene_problem(scene), scene_traj_data(scene), scene.description)
        return game_file

    def reset(self, seed: int, split: str = "train") -> tuple[AbstractState, dict[str, Any]]:
        """Load (writing if needed) game ``(split, seed)`` and return its initial state.

        Returns:
            ``(state, info)`` with ``info`` keys ``raw_observation``, ``seed``, ``split``,
            ``game_file`` and ``expert_plan_length``.

        Raises:
            ValueError: unknown split.
        """
        return self._play(self.game_path(seed, split), seed, split)

    def __enter__(self) -> AlfWorldEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _skipped(folder: Path) -> bool:
    return "movable" in str(folder) or "Sliced" in str(folder)


def list_official_games(
    data_dir: str | os.PathLike[str], folder: str, task_types: list[str] | None = None
) -> list[Path]:
    """Trial folders of ``<data_dir>/json_2.1.1/<folder>`` that ALFWorld can play, sorted.

    A folder counts when it has ``traj_data.json`` and either a ``game.tw-pddl`` not marked
    unsolvable or an ``initial_state.pddl``; movable-receptacle and sliced-object folders and
    task types outside ``task_types`` (ALFRED names, default all) are skipped.

    Raises:
        FileNotFoundError: the split folder does not exist.
    """
    root = Path(data_dir).expanduser() / "json_2.1.1" / folder
    if not root.is_dir():
        raise FileNotFoundError(
            f"ALFWorld data folder {root} not found; set ALFWORLD_DATA to the folder holding "
            "json_2.1.1 (see docs/environments.md)"
        )
    games = []
    for traj in sorted(root.rglob("traj_data.json")):
        trial = traj.parent
        if _skipped(trial.relative_to(root)):
            continue
        if task_types is not None:
            task_type = json.loads(traj.read_text()).get("task_type")
            if task_type not in task_types:
                continue
        shipped = trial / "game.tw-pddl"
        if shipped.is_file():
            if json.loads(shipped.read_text()).get("solvable") is False:
                continue
        elif not (trial / "initial_state.pddl").is_file():
            continue
        games.append(trial)
    return games


class AlfWorldDataEnv(_AlfredGames):
    """ALFWorld's official tasks (``json_2.1.1``) behind the RealEnv interface.

    Args:
        data_dir: folder holding ``json_2.1.1`` (default ``$ALFWORLD_DATA``, else ALFWorld's own
            default ``~/.cache/alfworld``, where ``alfworld-download`` puts it).
        max_steps: truncation limit in actions (default 50).
        cache_dir: where games built from ``initial_state.pddl`` are written (default
            ``<alfworld cache>/official``).
        task_types: ALFRED task types to play (default all six).
        eval_folder: data folder of ``split="eval"``: ``"valid_unseen"`` (default) or
            ``"valid_seen"``.

    Attributes:
        environment_id: ``"alfworld-official"``.

    Raises:
        ValueError: bad ``eval_folder`` or ``max_steps < 1``. Missing data raises
            ``FileNotFoundError`` (naming the folder and ``ALFWORLD_DATA``) at ``reset``.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        max_steps: int | None = None,
        cache_dir: str | os.PathLike[str] | None = None,
        task_types: list[str] | None = None,
        eval_folder: str = DATA_FOLDERS["eval"],
    ):
        data = data_dir or os.environ.get("ALFWORLD_DATA") or ALFWORLD_DEFAULT_DATA
        if eval_folder not in ("valid_seen", "valid_unseen"):
            raise ValueError(f"eval_folder must be valid_seen or valid_unseen, got {eval_folder!r}")
        self.environment_id = OFFICIAL_ENVIRONMENT_ID
        self.data_dir = Path(data).expanduser()
        self.max_steps = OFFICIAL_MAX_STEPS if max_steps is None else int(max_steps)
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        self.cache_dir = (
            Path(cache_dir).expanduser() if cache_dir else _default_cache_dir() / "official"
        )
        self.task_types = task_types
        self.folders = {"train": DATA_FOLDERS["train"], "eval": eval_folder}
        self._games: dict[str, list[Path]] = {}
        self._init_engine()

    def games(self, split: str) -> list[Path]:
        """The playable trial folders of ``split`` (listed once, then cached).

        Raises:
            ValueError: unknown split or no playable game.
            FileNotFoundError: the split's data folder is missing.
        """
        if split not in self.folders:
            raise ValueError(f"split must be one of {sorted(self.folders)}, got {split!r}")
        if split not in self._games:
            found = list_official_games(self.data_dir, self.folders[split], self.task_types)
            if not found:
                raise ValueError(f"no playable ALFWorld game in {self.folders[split]}")
            self._games[split] = found
        return self._games[split]

    def game_path(self, seed: int, split: str = "train") -> Path:
        """``game.tw-pddl`` of game ``(split, seed)``: the shipped one, or one built into the
        cache from ``initial_state.pddl`` and ``traj_data.json``."""
        games = self.games(split)
        trial = games[(int(seed) % SPLIT_SIZE) % len(games)]
        shipped = trial / "game.tw-pddl"
        if shipped.is_file():
            return shipped
        relative = trial.relative_to(self.data_dir)
        key = hashlib.sha256(str(relative).encode()).hexdigest()[:16]
        folder = self.cache_dir / key
        game_file = folder / "game.tw-pddl"
        if not game_file.is_file():
            traj_data = json.loads((trial / "traj_data.json").read_text())
            rng = random.Random(str(relative))
            description = _templated_description(traj_data, rng)
            problem = (trial / "initial_state.pddl").read_text()
            write_game(folder, problem, traj_data, description)
        return game_file

    def reset(self, seed: int, split: str = "train") -> tuple[AbstractState, dict[str, Any]]:
        """Load the official game selected by ``(split, seed)`` and return its initial state.

        Returns:
            ``(state, info)`` as :meth:`AlfWorldEnv.reset`, plus ``info["trial"]`` (the folder).
        """
        game_file = self.game_path(seed, split)
        state, info = self._play(game_file, seed, split)
        games = self.games(split)
        info["trial"] = str(games[(int(seed) % SPLIT_SIZE) % len(games)])
        return state, info

    def __enter__(self) -> AlfWorldDataEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
