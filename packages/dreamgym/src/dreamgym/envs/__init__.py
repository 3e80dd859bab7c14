"""Real text environments behind DreamGym's abstract state: adapters, registry and splits.

>>> from dreamgym.envs import make_env, seeds
>>> env = make_env("twx-coin")                              # doctest: +SKIP
>>> state, info = env.reset(seeds("train", 1)[0])           # doctest: +SKIP

Importing this package is cheap: ``textworld``, ``textworld_express``, ``scienceworld``,
``alfworld`` and ``bs4`` are imported inside the adapters when a game is first built, reset or
parsed.
"""

from dreamgym.envs.abstraction import (
    abstract_observation,
    action_referents,
    normalise_textworld_text,
    split_sentences,
)
from dreamgym.envs.alfworld_env import AlfWorldDataEnv, AlfWorldEnv
from dreamgym.envs.base import RealEnv, StepResult
from dreamgym.envs.registry import describe_environments, list_environments, make_env
from dreamgym.envs.scienceworld_env import ScienceWorldEnv
from dreamgym.envs.splits import assert_disjoint, seeds, split_of
from dreamgym.envs.textworld_env import TextWorldEnv
from dreamgym.envs.twx import TWXEnv
from dreamgym.envs.webshop_env import WebShopEnv

__all__ = [
    "AlfWorldDataEnv",
    "AlfWorldEnv",
    "RealEnv",
    "ScienceWorldEnv",
    "StepResult",
    "TWXEnv",
    "TextWorldEnv",
    "WebShopEnv",
    "abstract_observation",
    "action_referents",
    "assert_disjoint",
    "describe_environments",
    "list_environments",
    "make_env",
    "normalise_textworld_text",
    "seeds",
    "split_of",
    "split_sentences",
]
