"""Rule-based mapping from raw text-game observations to DreamGym's abstract textual state.

DreamGym runs its experience model in an "abstract, meta-representational textual state space"
that drops dimensions irrelevant to acting (arXiv 2511.03773 §4.1; for web pages, a short list of
actionable elements). The sim-to-real recipe applies *the same* rule-based mapping to real
observations in every setting, so real and imagined episodes share one state space (§4.3).

For room-description games (TextWorldExpress, TextWorld) the mapping

1. normalises whitespace and splits the text into sentences;
2. keeps the location sentence (``You are in the kitchen.``), exit sentences
   (``To the North you see the pantry.``) and every sentence that is not an object listing;
3. keeps an object-listing sentence (``In one part of the room you see a stove.``) only when it
   mentions something an admissible action refers to, rewritten as ``You see a stove.``.

So in Coin Collector the furniture nobody can act on disappears and the coin, the exits and the
doors stay; in CookingWorld, where every object can be examined, nearly everything stays.

TextWorld's Z-machine output carries interface chrome that TextWorldExpress does not have (an ASCII
banner, ``-= Room =-`` headers, the ``>`` prompt with a status bar, end-of-game prompts).
:func:`normalise_textworld_text` removes it first, turning the header into a TWX-style location
sentence, so both engines feed :func:`abstract_observation` the same kind of text.

>>> abstract_observation(
...     "You are in the pantry. In one part of the room you see a shelf. You also see a coin. "
...     "\\nTo the North you see the kitchen. ",
...     ["take coin", "move north", "look around", "inventory"],
... )
'You are in the pantry. You see a coin. To the North you see the kitchen.'
"""

from __future__ import annotations

import re

__all__ = [
    "abstract_observation",
    "action_referents",
    "normalise_textworld_text",
    "split_sentences",
]

_OBJECT_INTRO = re.compile(
    r"^(?:in (?:one|another) part of the room you see|there is also|you also see|you see)\s+",
    re.IGNORECASE,
)
_EXIT = re.compile(r"\bto the (?:north|south|east|west)\b", re.IGNORECASE)
_SPLIT_WORDS = re.compile(r"\s+(?:in|on|to|from|with|into)\s+")
_META_ACTIONS = frozenset({"look around", "inventory", "look", "wait"})

# TextWorld (Z-machine) interface chrome, see normalise_textworld_text.
_TW_PROMPT = re.compile(r"^>", re.MULTILINE)
_TW_BANNER_LINE = re.compile(r"^[\s_|\\/$<>]*[_|$][\s_|\\/$<>]*$")
_TW_ROOM_HEADER = re.compile(r"^\s*-=\s*(.+?)\s*=-\s*$")
_TW_END_LINES = re.compile(
    r"^\s*(?:\*\*\*.*\*\*\*|You scored .* out of a possible .*|Would you like to RESTART.*)\s*$"
)


def split_sentences(text: str) -> list[str]:
    """Split text into sentences, normalising whitespace.

    Args:
        text: raw observation text.

    Returns:
        Non-empty sentences, each ending with its original punctuation.
    """
    flat = re.sub(r"\s+", " ", text).strip()
    if not flat:
        return []
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z\"'(\[-])", flat)
    return [p.strip() for p in parts if p.strip()]


def action_referents(admissible_actions: list[str]) -> set[str]:
    """Noun phrases the admissible actions refer to (verb dropped, split on prepositions).

    >>> sorted(action_referents(["put black blanket in chest of drawers", "take coin"]))
    ['black blanket', 'chest of drawers', 'coin']
    """
    referents: set[str] = set()
    for action in admissible_actions:
        a = action.strip().lower()
        if not a or a in _META_ACTIONS or " " not in a:
            continue
        _, rest = a.split(" ", 1)
        for fragment in _SPLIT_WORDS.split(rest):
            fragment = fragment.strip()
            if len(fragment) >= 3:
                referents.add(fragment)
    return referents


def abstract_observation(raw: str, admissible_actions: list[str]) -> str:
    """Map a raw room-description observation to the abstract observation.

    Args:
        raw: the environment's raw observation text.
        admissible_actions: actions admissible in this state (decide which objects matter).

    Returns:
        The abstract observation: one line of sentences; non-room observations (``You take the
        coin.``) come back whitespace-normalised but otherwise unchanged.
    """
    referents = action_referents(admissible_actions)
    kept: list[str] = []
    for sentence in split_sentences(raw):
        intro = _OBJECT_INTRO.match(sentence)
        if intro is None or _EXIT.search(sentence):
            kept.append(sentence)
            continue
        body = sentence[intro.end() :]
        lowered = body.lower()
        if any(ref in lowered for ref in referents):
            kept.append("You see " + body)
    return " ".join(kept)


def normalise_textworld_text(raw: str) -> str:
    """Strip TextWorld's interface chrome from a raw observation (before the abstract mapping).

    Removes the ASCII-art banner, everything from the ``>`` prompt line on (status bar with room
    name and score/moves), and the end-of-game lines (``*** The End ***``, ``You scored ...``,
    ``Would you like to RESTART ...``); rewrites a ``-= Kitchen =-`` room header as the
    TextWorldExpress-style sentence ``You are in the kitchen.``. Everything else (room prose,
    exits, objects, action feedback, score messages) is kept.

    Args:
        raw: TextWorld feedback or description text.

    Returns:
        The cleaned text (newlines kept; :func:`abstract_observation` flattens them).

    >>> normalise_textworld_text("\\n-= Studio =-\\nThere is a coin.\\n\\n>   -= Studio =-0/5")
    'You are in the studio.\\nThere is a coin.'
    """
    text = _TW_PROMPT.split(raw, maxsplit=1)[0]
    lines: list[str] = []
    for line in text.splitlines():
        if _TW_BANNER_LINE.match(line) or _TW_END_LINES.match(line):
            continue
        header = _TW_ROOM_HEADER.match(line)
        lines.append(f"You are in the {header.group(1).lower()}." if header else line)
    return "\n".join(lines).strip()
