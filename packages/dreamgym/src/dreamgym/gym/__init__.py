"""Gymnasium adapters of the experience model (client side).

- :class:`ExperienceModelEnv` — ``gymnasium.Env[str, str]``, one imagined episode at a time;
- :class:`ExperienceModelVectorEnv` — ``gymnasium.vector.VectorEnv``, one batch step request
  (``POST /v1/episodes:step``) per vector step, Gymnasium autoreset modes;
- :class:`UnicodeText` — the text space of both.

Importing this package registers ``"dreamgym/ExperienceModel-v0"``:

>>> env = gymnasium.make("dreamgym/ExperienceModel-v0", client=url, tasks=tasks)  # doctest: +SKIP
>>> envs = gymnasium.make_vec("dreamgym/ExperienceModel-v0", num_envs=8, vectorization_mode=
...     "vector_entry_point", client=url, tasks=tasks)  # doctest: +SKIP

Needs the ``gym`` extra (``pip install dreamgym[gym]``).
"""

import gymnasium

from dreamgym.gym.env import ExperienceModelEnv
from dreamgym.gym.spaces import UnicodeText
from dreamgym.gym.vector import ExperienceModelVectorEnv

__all__ = ["ENV_ID", "ExperienceModelEnv", "ExperienceModelVectorEnv", "UnicodeText"]

ENV_ID = "dreamgym/ExperienceModel-v0"

if ENV_ID not in gymnasium.registry:
    gymnasium.register(
        id=ENV_ID,
        entry_point="dreamgym.gym.env:ExperienceModelEnv",
        vector_entry_point="dreamgym.gym.vector:ExperienceModelVectorEnv",
        nondeterministic=False,
    )
