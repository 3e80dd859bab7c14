"""Fixtures for the real-environment tests: one JVM per TWX game and ScienceWorld task, one
TextWorld game cache, one ALFWorld game cache, a fake WebShop server.

TextWorld games are compiled into a cache shared by the whole test session (set
``DREAMGYM_TEST_TW_CACHE`` to keep it between runs); tests use only the seeds in
:data:`TW_SEEDS` so at most a handful of games are built.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dreamgym.envs import AlfWorldEnv, ScienceWorldEnv, TextWorldEnv, TWXEnv

from .fake_webshop import fake_webshop

TW_SEEDS = {"train": (0, 1), "eval": (1_000_000,)}


def textworld_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's TextWorld game cache (same path for every test module)."""
    override = os.environ.get("DREAMGYM_TEST_TW_CACHE")
    return Path(override) if override else tmp_path_factory.getbasetemp() / "textworld-cache"


@pytest.fixture(scope="session")
def tw_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return textworld_cache(tmp_path_factory)


@pytest.fixture(scope="session")
def twx_env() -> Iterator[Callable[[str], TWXEnv]]:
    """Factory ``twx_env(game)``: one default-parameter adapter (one JVM) per game."""
    envs: dict[str, TWXEnv] = {}

    def get(game: str) -> TWXEnv:
        if game not in envs:
            envs[game] = TWXEnv(game)
        return envs[game]

    yield get
    for env in envs.values():
        env.close()


@pytest.fixture(scope="session")
def tw_env(tw_cache_dir: Path) -> Iterator[Callable[[str], TextWorldEnv]]:
    """Factory ``tw_env(challenge)``: one default-parameter adapter per challenge."""
    envs: dict[str, TextWorldEnv] = {}

    def get(challenge: str) -> TextWorldEnv:
        if challenge not in envs:
            envs[challenge] = TextWorldEnv(challenge, cache_dir=tw_cache_dir)
        return envs[challenge]

    yield get
    for env in envs.values():
        env.close()


@pytest.fixture(scope="session")
def sw_env() -> Iterator[Callable[[str], ScienceWorldEnv]]:
    """Factory ``sw_env(task)``: one default-parameter ScienceWorld adapter (one JVM) per task."""
    envs: dict[str, ScienceWorldEnv] = {}

    def get(task: str) -> ScienceWorldEnv:
        if task not in envs:
            envs[task] = ScienceWorldEnv(task)
        return envs[task]

    yield get
    for env in envs.values():
        env.close()


@pytest.fixture(scope="session")
def alfworld_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.getbasetemp() / "alfworld-cache"


@pytest.fixture(scope="session")
def alfworld_env(alfworld_cache_dir: Path) -> Iterator[Callable[[str], AlfWorldEnv]]:
    """Factory ``alfworld_env(task)``: one default-parameter generated-ALFWorld adapter per task."""
    envs: dict[str, AlfWorldEnv] = {}

    def get(task: str) -> AlfWorldEnv:
        if task not in envs:
            envs[task] = AlfWorldEnv(task, cache_dir=alfworld_cache_dir)
        return envs[task]

    yield get
    for env in envs.values():
        env.close()


@pytest.fixture(scope="session")
def webshop_url() -> Iterator[str]:
    """URL of a fake WebShop server (tests/dreamgym/envs/fake_webshop.py) for the session."""
    with fake_webshop() as server:
        host, port = server.server_address[:2]
        yield f"http://{host}:{port}"
