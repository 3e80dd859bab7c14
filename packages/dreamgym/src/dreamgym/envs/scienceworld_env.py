"""ScienceWorld adapter: short science tasks with ScienceWorld's own train/test variations.

ScienceWorld (Wang et al., 2022; the ``scienceworld`` package, a JVM simulator driven through py4j,
jar inside the wheel) has 30 task types, each with numbered *variations* that ScienceWorld itself
splits into train / dev / test sets. One JVM is started lazily per :class:`ScienceWorldEnv` and
reused for every episode (start-up 4-5 s; a task load 0.1-1 s).

Environment ids (task types chosen for short gold paths, measured on 2 loaded CPU cores):

=============================== =================================== ======== ================
id                              task                                gold     max_steps
=============================== =================================== ======== ================
``sw-find-non-living-thing``    find a non-living thing, focus on   3-7      15
                                it, move it to a box
``sw-lifespan-longest-lived``   focus on the longest-lived of 3     4-8      15
                                animals
``sw-find-living-thing``        find a living thing (an egg         6-12     20
                                outdoors), focus, move it to a box
=============================== =================================== ======== ================

Longer task types (boil 31-50 gold actions, grow-plant 63-69, mendelian genetics 130-147) are out
of reach for small agents and are not registered; any ScienceWorld task name can still be played
with ``ScienceWorldEnv(task_name)``.

Splits: a seed selects a variation of ScienceWorld's own lists: ``split="train"`` plays
``get_variations_train()[seed mod n]`` and ``split="eval"`` plays ``get_variations_test()``
(``seed`` taken modulo 1,000,000 first, so ``seeds("eval", k)`` enumerates the first ``k`` test
variations). The dev variations are never played. Held-out variations are therefore never trained
on, however many seeds are used.

Observation: ScienceWorld's step feedback (at reset: the ``look around`` text), with the agent and
the air dropped from room listings, listings sorted (:func:`canonical_listing`; ScienceWorld's
order changes between loads), and ``You are in the <room>.`` appended when the feedback does not
describe the room. The room listing itself is shown only after ``look around``.

Admissible actions: ScienceWorld's valid-action list has 400-3,000 entries per state (every
template over every pair of known objects), far too many for a prompt. The adapter keeps a bounded,
state-derived subset that uses no knowledge of the solution:

1. templates in :data:`DEFAULT_ACTION_TEMPLATES` only (navigation, open/close, pick up/put down,
   focus, move, look around, inventory, wait1);
2. every object named by the action is *in view*: ScienceWorld lists it as perceivable now
   (``get_possible_object_referent_LUT``) or it is named in the inventory text; the agent, the
   air, the inventory and rooms (except as ``go to`` targets) are never objects;
3. ``move X to Y`` only for ``X`` held in the inventory or the object last focused on, and ``Y`` a
   container in view (listed as ``(containing ...)`` or ``On/In the Y is:``);
4. at most ``max_actions`` (default 100; the largest room, the kitchen, gives 80-90): when more
   remain, groups are kept in the order meta, ``go``, ``open``/``close``, ``focus``,
   ``pick up``/``put down``, ``move``, each sorted.

Objects are named canonically (:func:`bounded_action_map`) by a referent no other object in reach
shares, because ScienceWorld's own names for similar objects change from load to load and are
sometimes ambiguous to its own parser. ``step`` sends the action as given (ScienceWorld parses free
text); if ScienceWorld still answers ``Ambiguous request: ...`` it picks option 0 within the same
step. The list is sorted.

Expert: ScienceWorld's gold path (``load(..., generateGoldPath=True)``), generated for the initial
state only and re-sampled by ScienceWorld at every reset (e.g. which of three eggs to take). The
adapter keeps the first gold path it sees per ``(split, variation)``, so within one adapter every
reset has the same plan. Gold actions often name objects by another referent than the valid list
(``move egg blue jay egg in inventory to green box``); :meth:`ScienceWorldEnv.expert_actions`
returns the next gold action rewritten to the admissible action with the same template and object
ids, followed by the raw rest of the plan. Gold steps that reopen an already open door (the gold
path opens the door it came through again) are skipped. As for TextWorldExpress,
state-preserving actions (``look around``, ``inventory``) keep the plan; any other deviation ends
it (``[]``).

Reward: outcome reward 1.0 on the step where ScienceWorld's score reaches 100 (``won``), else 0.0.
``info["score"]`` is the score normalised to [0, 1] (negative scores, which ScienceWorld uses for a
failed task, clip to 0), ``info["native_reward"]`` the normalised score delta. A negative score
(e.g. focusing on the wrong object) terminates the episode as lost.

>>> env = ScienceWorldEnv("find-non-living-thing")           # doctest: +SKIP
>>> state, info = env.reset(seed=0)                           # doctest: +SKIP
>>> env.step(env.expert_actions()[0]).state.step              # doctest: +SKIP
1
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dreamgym.envs.abstraction import abstract_observation
from dreamgym.envs.accounting import record_real_step
from dreamgym.envs.base import StepResult
from dreamgym.envs.splits import SPLIT_SIZE
from dreamgym.types import AbstractState

__all__ = [
    "DEFAULT_ACTION_TEMPLATES",
    "DEFAULT_MAX_ACTIONS",
    "DEFAULT_MAX_STEPS",
    "ENVIRONMENT_IDS",
    "VARIATION_SETS",
    "ScienceWorldEnv",
    "bounded_action_map",
    "bounded_actions",
    "canonical_listing",
    "container_names",
    "gold_alias",
    "room_name",
    "visible_object_ids",
]

ENVIRONMENT_IDS: dict[str, str] = {
    "sw-find-non-living-thing": "find-non-living-thing",
    "sw-lifespan-longest-lived": "lifespan-longest-lived",
    "sw-find-living-thing": "find-living-thing",
}
DEFAULT_MAX_STEPS: dict[str, int] = {
    "find-non-living-thing": 15,
    "lifespan-longest-lived": 15,
    "find-living-thing": 20,
}
_FALLBACK_MAX_STEPS = 30
_TEMPLATE_WORDING = {"go OBJ": "go to OBJ"}  # ScienceWorld renders this template with "to"
VARIATION_SETS: dict[str, str] = {"train": "train", "eval": "test"}
DEFAULT_ACTION_TEMPLATES: tuple[str, ...] = (
    "look around",
    "inventory",
    "wait1",
    "go OBJ",
    "open OBJ",
    "close OBJ",
    "focus on OBJ",
    "pick up OBJ",
    "put down OBJ",
    "move OBJ to OBJ",
)
DEFAULT_MAX_ACTIONS = 100
_GROUP_ORDER: dict[str, int] = {
    "look around": 0,
    "inventory": 0,
    "wait1": 0,
    "go OBJ": 1,
    "open OBJ": 2,
    "close OBJ": 2,
    "focus on OBJ": 3,
    "pick up OBJ": 4,
    "put down OBJ": 4,
}
_NOT_OBJECTS = frozenset({"agent", "air", "inventory"})
_STATE_PRESERVING = frozenset({"look around", "inventory"})
_BACKEND_STEP_LIMIT = 1_000_000_000
_GOLD_CACHE_SIZE = 100_000
_SCORE_WIN = 100

_ROOM = re.compile(r"(?:This room|This outside location) is called the ([^.]+)\.", re.IGNORECASE)
_CONTAINER = re.compile(
    r"(?:\ban?|\bthe) ([a-z][a-z ]*?) \(containing|\b(?:On|In) the ([a-z][a-z ]*?) is:",
    re.IGNORECASE,
)
_LISTING_NOISE = re.compile(r"^\s*(?:the agent|a substance called air)\s*$", re.IGNORECASE)
_FOCUS_FEEDBACK = re.compile(r"^\s*You focus on", re.IGNORECASE)
_AMBIGUOUS = re.compile(r"^\s*Ambiguous request", re.IGNORECASE)
_CONTAINING = re.compile(r"\(containing ((?:[^()]|\([^()]*\))*)\)")
_ON_IN = re.compile(r"((?:On|In) the [a-z ]+ is: )(.*)\.\s*$")


# --------------------------------------------------------------------------- pure helpers


def room_name(look: str) -> str | None:
    """The current room from ScienceWorld's ``look around`` text (``None`` if not found).

    >>> room_name("This room is called the kitchen. In it, you see: ...")
    'kitchen'
    """
    match = _ROOM.search(look)
    return match.group(1).strip().lower() if match else None


def container_names(look: str) -> set[str]:
    """Names of things in view that hold other things, from the ``look around`` text.

    >>> look = "a green box (containing nothing)\\na table. On the table is: a cup"
    >>> sorted(container_names(look))
    ['green box', 'table']
    """
    return {(a or b).strip().lower() for a, b in _CONTAINER.findall(look)}


def _phrase_in(phrase: str, text: str) -> bool:
    return re.search(r"(?<![a-z])" + re.escape(phrase) + r"(?![a-z])", text) is not None


def visible_object_ids(referents: Mapping[int, Sequence[str]], text: str) -> set[int]:
    """Ids of the objects one of whose referents appears as a whole phrase in ``text``.

    Args:
        referents: object id → its referent names (ScienceWorld's
            ``get_all_object_ids_types_referents_LUTJSON``).
        text: the ``look`` and/or inventory text.
    """
    flat = " ".join(text.lower().split())
    return {
        oid
        for oid, names in referents.items()
        if any(len(name) >= 3 and _phrase_in(name.lower(), flat) for name in names)
    }


def _template_regex(template: str) -> re.Pattern[str]:
    parts = [re.escape(p) for p in template.split("OBJ")]
    return re.compile("(.+)".join(parts))


def _referent_ids(referents: Mapping[int, Sequence[str]], phrase: str) -> set[int]:
    """Objects named ``phrase``, also after dropping trailing ``in/on <place>`` qualifiers."""
    phrase = " ".join(phrase.lower().split())
    while True:
        ids = {oid for oid, names in referents.items() if phrase in {n.lower() for n in names}}
        if ids:
            return ids
        head, sep, _ = phrase.rpartition(" in ")
        head_on, sep_on, _ = phrase.rpartition(" on ")
        cut = max((head if sep else ""), (head_on if sep_on else ""), key=len)
        if not cut:
            return set()
        phrase = cut


def gold_alias(
    action: str,
    valid: Sequence[Mapping[str, Any]],
    templates: Mapping[int, str],
    referents: Mapping[int, Sequence[str]],
) -> str:
    """The valid action equivalent to ``action`` (same template and object ids), else ``action``.

    ScienceWorld's gold path and its valid-action list may name one object differently
    (``egg blue jay egg in inventory`` vs ``blue jay egg``); both parse to the same object.

    Args:
        action: an action string, e.g. a gold-path step.
        valid: ScienceWorld's valid actions with templates: dicts with ``action``,
            ``template_id`` and ``obj_ids``.
        templates: template id → template text (``"move OBJ to OBJ"``).
        referents: object id → referent names.
    """
    if any(v["action"] == action for v in valid):
        return action
    for template_id, template in templates.items():
        n_objects = template.count("OBJ")
        if n_objects == 0:
            continue
        for groups in _splits(template, action):
            candidates = [_referent_ids(referents, g) for g in groups]
            if not all(candidates):
                continue
            for v in sorted(valid, key=lambda v: v["action"]):
                ids = list(v["obj_ids"])
                if (
                    v["template_id"] == template_id
                    and len(ids) == n_objects
                    and all(i in c for i, c in zip(ids, candidates, strict=True))
                ):
                    return str(v["action"])
    return _word_subset_alias(action, valid, templates)


def _word_subset_alias(
    action: str, valid: Sequence[Mapping[str, Any]], templates: Mapping[int, str]
) -> str:
    """Fallback for objects without usable referents (ScienceWorld's doors, "portals").

    The gold path names a door ``door to hallway``; when only one door is in view the valid list
    says ``open door``. The alias is the unique valid action of the same template whose object
    words are all among the action's words.
    """
    words = set(action.split())
    matches = []
    for v in valid:
        template = templates.get(v["template_id"], "")
        literals = [part.strip() for part in template.split("OBJ") if part.strip()]
        if template.count("OBJ") != 1 or not action.startswith(literals[0] + " "):
            continue
        if set(str(v["action"]).split()) <= words:
            matches.append(str(v["action"]))
    return matches[0] if len(set(matches)) == 1 else action


def _splits(template: str, action: str) -> Iterable[tuple[str, ...]]:
    """Every way of reading ``action`` as ``template`` (``OBJ`` slots filled by phrases)."""
    literals = template.split("OBJ")
    if not (action.startswith(literals[0]) and action.endswith(literals[-1])):
        return
    body = action[len(literals[0]) : len(action) - len(literals[-1]) or None]
    if len(literals) == 2:
        if body:
            yield (body,)
        return
    if len(literals) == 3:
        middle = literals[1]
        start = 0
        while (at := body.find(middle, start)) >= 0:
            left, right = body[:at], body[at + len(middle) :]
            if left and right:
                yield (left, right)
            start = at + 1


def bounded_actions(
    valid: Sequence[Mapping[str, Any]],
    templates: Mapping[int, str],
    referents: Mapping[int, Sequence[str]],
    look: str,
    inventory: str,
    *,
    scope: Iterable[int] = (),
    focused: int | None = None,
    allowed_templates: Iterable[str] = DEFAULT_ACTION_TEMPLATES,
    max_actions: int = DEFAULT_MAX_ACTIONS,
) -> list[str]:
    """The bounded admissible actions (module docstring), sorted, in canonical object names.

    See :func:`bounded_action_map` for the arguments; this returns its keys, sorted.
    """
    return sorted(
        bounded_action_map(
            valid,
            templates,
            referents,
            look,
            inventory,
            scope=scope,
            focused=focused,
            allowed_templates=allowed_templates,
            max_actions=max_actions,
        )
    )


def bounded_action_map(
    valid: Sequence[Mapping[str, Any]],
    templates: Mapping[int, str],
    referents: Mapping[int, Sequence[str]],
    look: str,
    inventory: str,
    *,
    scope: Iterable[int] = (),
    focused: int | None = None,
    allowed_templates: Iterable[str] = DEFAULT_ACTION_TEMPLATES,
    max_actions: int = DEFAULT_MAX_ACTIONS,
) -> list[str]:
    """The bounded admissible-action subset of ScienceWorld's valid actions (module docstring).

    ScienceWorld names an object in its valid-action list by one of several referents, and which
    one changes from load to load when similar objects are around (``paint`` vs ``paint in cup
    containing red paint``). Each kept action is therefore renamed canonically: every object by
    a referent no other object in reach shares, preferring the longest one the agent can read in
    the look or inventory text (``green box``), else the shortest; actions on objects without one
    (doors) keep ScienceWorld's wording.

    Args:
        valid: valid actions with ``action``, ``template_id`` and ``obj_ids``.
        templates: template id → template text.
        referents: object id → referent names.
        look: the current ``look around`` text.
        inventory: the current inventory text.
        scope: ids of the objects ScienceWorld lists as perceivable now
            (``get_possible_object_referent_LUT``); objects in the inventory text are added.
        focused: id of the object last focused on, if any.
        allowed_templates: templates to keep.
        max_actions: cap on the number of actions (>= 1).

    Returns:
        Canonical action → ScienceWorld's action string, at most ``max_actions`` entries.
    """
    allowed = set(allowed_templates)
    not_objects = {
        oid for oid, names in referents.items() if {n.lower() for n in names} & _NOT_OBJECTS
    }
    locations = {
        int(i) for v in valid if templates.get(v["template_id"]) == "go OBJ" for i in v["obj_ids"]
    } | {oid for oid, names in referents.items() if "room" in {n.lower() for n in names}}
    held = visible_object_ids(referents, inventory)
    in_view = {int(i) for i in scope} | held
    containers = {
        oid
        for oid, names in referents.items()
        if oid in in_view and {n.lower() for n in names} & container_names(look)
    }
    movable = held | ({focused} if focused is not None else set())
    chosen: list[tuple[str, list[int], str]] = []
    for v in valid:
        template = templates.get(v["template_id"])
        if template not in allowed:
            continue
        ids = [int(i) for i in v["obj_ids"]]
        if template == "go OBJ":
            ok = True
        elif any(i in not_objects or i in locations for i in ids):
            ok = False
        elif template == "move OBJ to OBJ":
            ok = len(ids) == 2 and ids[0] in movable and ids[1] in containers and ids[0] != ids[1]
        else:
            ok = all(i in in_view or i in held for i in ids)
        if ok:
            chosen.append((str(template), ids, str(v["action"])))
    in_reach = in_view | locations | {i for _, ids, _ in chosen for i in ids}
    names = _canonical_names(referents, in_reach, f"{look}\n{inventory}")
    kept: dict[str, tuple[int, str]] = {}
    for template, ids, raw in sorted(chosen, key=lambda c: c[2]):
        wording = _TEMPLATE_WORDING.get(template, template)
        canonical = _fill(wording, [names.get(i) for i in ids]) or raw
        kept.setdefault(canonical, (_GROUP_ORDER.get(template, 5), raw))
    ranked = sorted(kept, key=lambda a: (kept[a][0], a))[: max(1, max_actions)]
    return {action: kept[action][1] for action in sorted(ranked)}


def _canonical_names(
    referents: Mapping[int, Sequence[str]], ids: set[int], text: str
) -> dict[int, str]:
    """Object id → a referent no other object in ``ids`` shares: the longest one that appears in
    ``text`` (what the agent reads), else the shortest (alphabetical on ties)."""
    flat = " ".join(text.lower().split())
    lowered = {oid: {n.lower() for n in referents.get(oid, ()) if n and "ERROR" not in n}
               for oid in ids}  # fmt: skip
    counts = Counter(name for names in lowered.values() for name in names)
    chosen = {}
    for oid, names in lowered.items():
        unique = [n for n in names if counts[n] == 1]
        if not unique:
            continue
        seen = [n for n in unique if _phrase_in(n, flat)]
        chosen[oid] = (
            min(seen, key=lambda n: (-len(n), n))
            if seen
            else min(unique, key=lambda n: (len(n), n))
        )
    return chosen


def _fill(template: str, names: Sequence[str | None]) -> str | None:
    """``template`` with its ``OBJ`` slots filled, or ``None`` if a name is missing."""
    if any(name is None for name in names):
        return None
    parts = template.split("OBJ")
    return "".join(part + (names[i] if i < len(names) else "") for i, part in enumerate(parts))


def canonical_listing(text: str) -> str:
    """ScienceWorld's room text with its object listings in a fixed (sorted) order.

    ScienceWorld lists the objects of a room, and the contents of containers, in an order that
    changes from load to load; sorting the tab-indented lines and the comma-separated contents
    makes the same state read the same.

    >>> canonical_listing("In it, you see:\\n\\ta cup (containing b, a)\\n\\ta bowl")
    'In it, you see:\\n\\ta bowl\\n\\ta cup (containing a, b)'
    """
    out: list[str] = []
    run: list[str] = []
    for line in text.split("\n"):
        if line.startswith("\t"):
            run.append(_sort_contents(line))
            continue
        out.extend(sorted(run))
        run = []
        out.append(_sort_contents(line))
    out.extend(sorted(run))
    return "\n".join(out)


def _split_top(items: str) -> list[str]:
    """Split at commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(items):
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(items[start:i].strip())
            start = i + 1
    parts.append(items[start:].strip())
    return [p for p in parts if p]


def _sort_contents(line: str) -> str:
    def containing(match: re.Match[str]) -> str:
        items = [_CONTAINING.sub(containing, item) for item in _split_top(match.group(1))]
        return f"(containing {', '.join(sorted(items))})"

    def on_in(match: re.Match[str]) -> str:
        return f"{match.group(1)}{', '.join(sorted(_split_top(match.group(2))))}."

    line = _CONTAINING.sub(containing, line)
    return _ON_IN.sub(on_in, line)


def _clean_feedback(raw: str) -> str:
    lines = [line for line in raw.splitlines() if not _LISTING_NOISE.match(line)]
    return "\n".join(lines)


def _task_text(raw: str) -> str:
    text = " ".join(raw.split())
    return text.removeprefix("Task Description:").strip()


def _variation_index(seed: int, count: int) -> int:
    return (int(seed) % SPLIT_SIZE) % count


@dataclass
class _Episode:
    """Book-keeping for the running episode."""

    seed: int
    split: str
    variation: int
    gold: list[str]
    valid: list[dict[str, Any]] = field(default_factory=list)
    referents: dict[int, list[str]] = field(default_factory=dict)
    scope: set[int] = field(default_factory=set)
    actions: dict[str, str] = field(default_factory=dict)  # canonical -> ScienceWorld's string
    look: str = ""
    inventory: str = ""
    focused: int | None = None
    next_alias: str | None = None
    gold_index: int = 0
    on_gold_path: bool = True
    score: int = 0
    step: int = 0
    done: bool = False


class ScienceWorldEnv:
    """A ScienceWorld task type behind the :class:`~dreamgym.envs.base.RealEnv` interface.

    Args:
        task: a ScienceWorld task name, e.g. ``"find-non-living-thing"``.
        max_steps: truncation limit in actions; default from :data:`DEFAULT_MAX_STEPS` (30 for
            unregistered task names).
        simplifications: ScienceWorld simplification string (``""`` or e.g. ``"easy"``).
        max_actions: cap on the admissible-action list (>= 1).
        action_templates: templates kept in the admissible-action list.

    Attributes:
        environment_id: ``"sw-<task>"``.
        max_steps: truncation limit in actions.
        num_steps_total: real environment steps over this adapter's lifetime (resets, whose
            ``look around`` ScienceWorld performs itself, do not count).

    Raises:
        ValueError: ``max_steps < 1`` or ``max_actions < 1``; an unknown task name or
            simplification is reported by ScienceWorld at the first ``reset``.
    """

    def __init__(
        self,
        task: str = "find-non-living-thing",
        *,
        max_steps: int | None = None,
        simplifications: str = "",
        max_actions: int = DEFAULT_MAX_ACTIONS,
        action_templates: Iterable[str] = DEFAULT_ACTION_TEMPLATES,
    ):
        self.task = task
        self.environment_id = f"sw-{task}"
        self.max_steps = (
            DEFAULT_MAX_STEPS.get(task, _FALLBACK_MAX_STEPS) if max_steps is None else max_steps
        )
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if max_actions < 1:
            raise ValueError(f"max_actions must be >= 1, got {max_actions}")
        self.simplifications = simplifications
        self.max_actions = int(max_actions)
        self.action_templates = tuple(action_templates)
        self.num_steps_total = 0
        self._backend: Any = None
        self._templates: dict[int, str] = {}
        self._variations: dict[str, list[int]] = {}
        self._gold_paths: dict[tuple[str, int], list[str]] = {}
        self._episode: _Episode | None = None

    # ------------------------------------------------------------------ RealEnv interface

    def variations(self, split: str) -> list[int]:
        """ScienceWorld's variation numbers played for ``split`` (``"train"`` or ``"eval"``).

        Raises:
            ValueError: unknown split, or ScienceWorld rejects the task name.
        """
        if split not in VARIATION_SETS:
            raise ValueError(f"split must be one of {sorted(VARIATION_SETS)}, got {split!r}")
        self._ensure_backend()
        return list(self._variations[split])

    def reset(self, seed: int, split: str = "train") -> tuple[AbstractState, dict[str, Any]]:
        """Load the variation of ``split`` selected by ``seed`` and return its initial state.

        Returns:
            ``(state, info)`` with ``info`` keys ``raw_observation``, ``seed``, ``split``,
            ``variation``, ``task_name`` and ``expert_plan_length``.

        Raises:
            ValueError: unknown split, task name or simplification.
        """
        variations = self.variations(split)
        variation = variations[_variation_index(seed, len(variations))]
        backend = self._backend
        backend.load(self.task, variation, self.simplifications, generateGoldPath=True)
        raw, infos = backend.reset()
        gold = self._gold_paths.setdefault(
            (split, variation), [str(a) for a in backend.get_gold_action_sequence()]
        )
        if len(self._gold_paths) > _GOLD_CACHE_SIZE:
            self._gold_paths.pop(next(iter(self._gold_paths)))
        episode = _Episode(seed=int(seed), split=split, variation=variation, gold=gold)
        episode.score = int(infos.get("score", 0))
        self._episode = episode
        self._refresh(episode)
        info = {
            "raw_observation": raw,
            "seed": int(seed),
            "split": split,
            "variation": variation,
            "task_name": self.task,
            "expert_plan_length": len(gold),
        }
        task = _task_text(str(infos.get("taskDesc", "")))
        return self._state(raw, task, episode, terminated=False), info

    def step(self, action: str) -> StepResult:
        """Apply ``action`` (free text; ScienceWorld answers unknown input with a message).

        Returns:
            A :class:`StepResult`: reward 1.0 on the step where the score reaches 100, else 0.0;
            ``terminated`` = won or lost (negative score); ``truncated`` = ``max_steps`` actions
            taken without termination. ``info`` holds ``raw_observation``, ``native_reward``
            (normalised score delta), ``score`` (normalised, clipped to [0, 1]), ``score_raw``
            (ScienceWorld's -100..100) and ``lost``.

        Raises:
            RuntimeError: before :meth:`reset` or after the episode ended.
        """
        episode = self._require_running()
        command = episode.actions.get(action, action)
        focus_target = self._focus_target(episode, command)
        raw, _, _, infos = self._backend.step(action)
        if _AMBIGUOUS.match(str(raw)):  # ScienceWorld asks which object was meant: the first
            raw, _, _, infos = self._backend.step("0")
        self.num_steps_total += 1
        record_real_step()
        episode.step += 1
        self._advance_gold(episode, action, command)
        if focus_target is not None and _FOCUS_FEEDBACK.match(str(raw)):
            episode.focused = focus_target
        previous, score = episode.score, int(infos["score"])
        episode.score = score
        won, lost = score >= _SCORE_WIN, score < 0
        terminated = won or lost
        truncated = not terminated and episode.step >= self.max_steps
        episode.done = terminated or truncated
        if terminated:
            episode.look, episode.inventory = str(infos["look"]), str(infos["inv"])
        else:  # a truncated state still lists its actions, as in the other adapters
            self._refresh(episode)
        info = {
            "raw_observation": raw,
            "native_reward": (max(score, 0) - max(previous, 0)) / _SCORE_WIN,
            "score": max(score, 0) / _SCORE_WIN,
            "score_raw": float(score),
            "lost": lost,
        }
        task = _task_text(str(infos.get("taskDesc", "")))
        return StepResult(
            state=self._state(raw, task, episode, terminated=terminated),
            reward=1.0 if won else 0.0,
            terminated=terminated,
            truncated=truncated,
            won=won,
            info=info,
        )

    def expert_actions(self) -> list[str]:
        """Remaining gold path, its next action rewritten to the admissible alias.

        ``[]`` once the agent has left the gold path or the episode ended (module docstring).
        """
        episode = self._episode
        if episode is None or episode.done or not episode.on_gold_path:
            return []
        rest = list(episode.gold[episode.gold_index :])
        if rest and episode.next_alias is not None:
            rest[0] = episode.next_alias
        return rest

    def close(self) -> None:
        """Shut down the JVM (a later :meth:`reset` starts a new one)."""
        backend, self._backend, self._episode = self._backend, None, None
        if backend is not None:
            with contextlib.suppress(Exception):  # the JVM may already be gone
                backend.close()

    def __enter__(self) -> ScienceWorldEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ helpers

    def _ensure_backend(self) -> Any:
        if self._backend is None:
            from scienceworld import ScienceWorldEnv as Backend

            backend = Backend("", envStepLimit=_BACKEND_STEP_LIMIT)
            try:
                backend.load(self.task, 0, self.simplifications)
                self._variations = {
                    "train": list(backend.get_variations_train()),
                    "eval": list(backend.get_variations_test()),
                }
                self._templates = {
                    int(t["template_id"]): str(t["action_example"])
                    for t in backend.get_possible_actions_with_IDs()
                }
            except Exception:
                with contextlib.suppress(Exception):
                    backend.close()
                raise
            self._backend = backend
        return self._backend

    def _require_running(self) -> _Episode:
        if self._episode is None or self._backend is None:
            raise RuntimeError(f"{self.environment_id}: call reset() before step()")
        if self._episode.done:
            raise RuntimeError(f"{self.environment_id}: the episode has ended; call reset()")
        return self._episode

    def _refresh(self, episode: _Episode) -> None:
        """Re-read the valid actions, referents, look and inventory after a reset or step."""
        backend = self._backend
        episode.valid = list(backend.get_valid_action_object_combinations_with_templates())
        episode.referents = {
            int(oid): list(entry.get("referents", []))
            for oid, entry in backend.get_all_object_ids_types_referents_LUTJSON().items()
        }
        episode.scope = {int(oid) for oid in backend.get_possible_object_referent_LUT()}
        episode.look, episode.inventory = str(backend.look()), str(backend.inventory())
        episode.actions = bounded_action_map(
            episode.valid,
            self._templates,
            episode.referents,
            episode.look,
            episode.inventory,
            scope=episode.scope,
            focused=episode.focused,
            allowed_templates=self.action_templates,
            max_actions=self.max_actions,
        )
        episode.next_alias = None
        while episode.gold_index < len(episode.gold) and self._redundant(
            episode, episode.gold[episode.gold_index]
        ):
            episode.gold_index += 1
        if episode.on_gold_path and episode.gold_index < len(episode.gold):
            raw = gold_alias(
                episode.gold[episode.gold_index], episode.valid, self._templates, episode.referents
            )
            canonical = {command: action for action, command in episode.actions.items()}
            episode.next_alias = canonical.get(raw, raw)

    def _redundant(self, episode: _Episode, action: str) -> bool:
        """A gold ``open X`` for a door that is already open (the gold path reopens the door it
        came through); it is not admissible and changes nothing, so the plan skips it."""
        if not action.startswith("open ") or any(v["action"] == action for v in episode.valid):
            return False
        close = "close " + action.removeprefix("open ")
        return gold_alias(close, episode.valid, self._templates, episode.referents) != close or any(
            v["action"] == close for v in episode.valid
        )

    def _focus_target(self, episode: _Episode, action: str) -> int | None:
        for v in episode.valid:
            if v["action"] == action and self._templates.get(v["template_id"]) == "focus on OBJ":
                return int(v["obj_ids"][0])
        return None

    @staticmethod
    def _advance_gold(episode: _Episode, action: str, command: str) -> None:
        if not episode.on_gold_path:
            return
        if episode.gold_index < len(episode.gold) and (
            action == episode.next_alias or command == episode.gold[episode.gold_index]
        ):
            episode.gold_index += 1
        elif action not in _STATE_PRESERVING:
            episode.on_gold_path = False

    def _state(self, raw: str, task: str, episode: _Episode, *, terminated: bool) -> AbstractState:
        admissible = [] if terminated else sorted(episode.actions)
        text = canonical_listing(_clean_feedback(str(raw)))
        room = room_name(episode.look)
        if room and room_name(text) is None:
            text = f"{text.strip()} You are in the {room}."
        return AbstractState(
            task=task or f"ScienceWorld task {self.task}",
            observation=abstract_observation(text, admissible),
            admissible_actions=admissible,
            step=episode.step,
        )
