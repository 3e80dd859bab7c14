"""Environment ids → real-environment adapters.

>>> list_environments()[:4]
['alfworld-clean', 'alfworld-cool', 'alfworld-heat', 'alfworld-official']
>>> env = make_env("twx-coin", max_steps=15, numLocations=4)    # doctest: +SKIP

Construction is cheap: TextWorldExpress and ScienceWorld start their JVM, TextWorld and ALFWorld
build games, and WebShop contacts its server at the first ``reset``. ``alfworld-official`` needs
ALFWorld's data (``ALFWORLD_DATA``) and ``webshop`` a running WebShop server
(``DREAMGYM_WEBSHOP_URL``); see docs/environments.md.
"""

from __future__ import annotations

import os
from typing import Any

from dreamgym.envs import alfworld_env, scienceworld_env, textworld_env, twx, webshop_env
from dreamgym.envs.base import RealEnv

__all__ = ["describe_environments", "list_environments", "make_env"]

_SOURCES: dict[str, str] = {
    "alfworld-official": "ALFWorld official tasks (json_2.1.1 under $ALFWORLD_DATA)",
    webshop_env.ENVIRONMENT_ID: "WebShop over HTTP ($DREAMGYM_WEBSHOP_URL)",
}


def list_environments() -> list[str]:
    """All registered environment ids, sorted."""
    return sorted(
        [
            *twx.ENVIRONMENT_IDS,
            *textworld_env.ENVIRONMENT_IDS,
            *scienceworld_env.ENVIRONMENT_IDS,
            *alfworld_env.ENVIRONMENT_IDS,
            alfworld_env.OFFICIAL_ENVIRONMENT_ID,
            webshop_env.ENVIRONMENT_ID,
        ]
    )


def describe_environments() -> dict[str, str]:
    """Environment id → one line saying where its games come from (for ``dreamgym envs``)."""
    described: dict[str, str] = {}
    for environment_id in list_environments():
        if environment_id in twx.ENVIRONMENT_IDS:
            described[environment_id] = "TextWorldExpress (in-memory games)"
        elif environment_id in textworld_env.ENVIRONMENT_IDS:
            described[environment_id] = "TextWorld (games compiled offline, cached)"
        elif environment_id in scienceworld_env.ENVIRONMENT_IDS:
            described[environment_id] = (
                f"ScienceWorld task {scienceworld_env.ENVIRONMENT_IDS[environment_id]!r}"
            )
        elif environment_id in alfworld_env.ENVIRONMENT_IDS:
            task = alfworld_env.ENVIRONMENT_IDS[environment_id]
            described[environment_id] = (
                f"ALFWorld engine, {alfworld_env.TASK_TYPES[task]} (generated PDDL)"
            )
        else:
            described[environment_id] = _SOURCES[environment_id]
    return described


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
        cache_dir: game cache for TextWorld and ALFWorld ids; ignored by the others.
        **params: adapter parameters: TWX generation properties (``numLocations=4``), TextWorld
            challenge settings (``level=10``), ScienceWorld ``simplifications`` /
            ``max_actions``, ALFWorld-official ``data_dir`` / ``task_types`` /
            ``eval_folder``, WebShop ``base_url`` / ``num_goals`` / ``timeout_s``.

    Returns:
        The adapter (:class:`~dreamgym.envs.twx.TWXEnv`,
        :class:`~dreamgym.envs.textworld_env.TextWorldEnv`,
        :class:`~dreamgym.envs.scienceworld_env.ScienceWorldEnv`,
        :class:`~dreamgym.envs.alfworld_env.AlfWorldEnv`,
        :class:`~dreamgym.envs.alfworld_env.AlfWorldDataEnv` or
        :class:`~dreamgym.envs.webshop_env.WebShopEnv`).

    Raises:
        ValueError: unknown id (the message lists the valid ids) or invalid parameters.
        TypeError: a parameter the adapter does not take.
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
    if environment_id in scienceworld_env.ENVIRONMENT_IDS:
        return scienceworld_env.ScienceWorldEnv(
            scienceworld_env.ENVIRONMENT_IDS[environment_id], max_steps=max_steps, **params
        )
    if environment_id in alfworld_env.ENVIRONMENT_IDS:
        return alfworld_env.AlfWorldEnv(
            alfworld_env.ENVIRONMENT_IDS[environment_id],
            max_steps=max_steps,
            cache_dir=cache_dir,
            **params,
        )
    if environment_id == alfworld_env.OFFICIAL_ENVIRONMENT_ID:
        return alfworld_env.AlfWorldDataEnv(max_steps=max_steps, cache_dir=cache_dir, **params)
    if environment_id == webshop_env.ENVIRONMENT_ID:
        return webshop_env.WebShopEnv(max_steps=max_steps, **params)
    raise ValueError(
        f"unknown environment id {environment_id!r}; valid ids: {', '.join(list_environments())}"
    )
