"""Environment ids → real-environment adapters.

>>> list_environments()
['tw-coin_collector', 'tw-cooking', 'twx-coin', 'twx-cookingworld', 'twx-twc']
>>> env = make_env("twx-coin", max_steps=15, numLocations=4)    # doctest: +SKIP

Construction is cheap: TextWorldExpress starts its JVM and TextWorld builds games at the first
``reset``.
"""

from __future__ import annotations

import os
from typing import Any

from dreamgym.envs import textworld_env, twx
from dreamgym.envs.base import RealEnv

__all__ = ["list_environments", "make_env"]


def list_environments() -> list[str]:
    """All registered environment ids, sorted."""
    return sorted([*twx.ENVIRONMENT_IDS, *textworld_env.ENVIRONMENT_IDS])


def make_env(
    environment_id: str,
    *,
    max_steps: int | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
    **params: Any,
) -> RealEnv:
    """Build the adapter for ``environment_id``.

    Args:
        environment_id: one of :func:`list_environments`.
        max_steps: truncation limit; ``None`` keeps the environment's default.
        cache_dir: compiled-game cache for TextWorld ids; ignored by TextWorldExpress, which
            generates games in memory.
        **params: game parameters (TWX generation properties such as ``numLocations=4``, or
            TextWorld challenge settings such as ``level=10``).

    Returns:
        A :class:`~dreamgym.envs.twx.TWXEnv` or :class:`~dreamgym.envs.textworld_env.TextWorldEnv`.

    Raises:
        ValueError: unknown id (the message lists the valid ids) or invalid parameters.
    """
    if environment_id in twx.ENVIRONMENT_IDS:
        return twx.TWXEnv(twx.ENVIRONMENT_IDS[environment_id], max_steps=max_steps, **params)
    if environment_id in textworld_env.ENVIRONMENT_IDS:
        return textworld_env.TextWorldEnv(
            textworld_env.ENVIRONMENT_IDS[environment_id],
            max_steps=max_steps,
            cache_dir=cache_dir,
            **params,
        )
    raise ValueError(
        f"unknown environment id {environment_id!r}; valid ids: {', '.join(list_environments())}"
    )
