"""Environment registry (dreamgym.envs.registry) and the package's public surface."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

import dreamgym.envs
from dreamgym.cli.main import app
from dreamgym.envs import (
    AlfWorldDataEnv,
    AlfWorldEnv,
    RealEnv,
    ScienceWorldEnv,
    TextWorldEnv,
    TWXEnv,
    WebShopEnv,
    describe_environments,
    list_environments,
    make_env,
)

ALL_IDS = [
    "alfworld-clean",
    "alfworld-cool",
    "alfworld-heat",
    "alfworld-official",
    "alfworld-pick",
    "sw-find-living-thing",
    "sw-find-non-living-thing",
    "sw-lifespan-longest-lived",
    "tw-coin_collector",
    "tw-cooking",
    "twx-coin",
    "twx-cookingworld",
    "twx-twc",
    "webshop",
]


def test_list_environments_returns_all_ids_sorted():
    assert list_environments() == ALL_IDS


@pytest.mark.parametrize("environment_id", ALL_IDS)
def test_make_env_known_id_returns_real_env_with_that_id(environment_id, tmp_path, monkeypatch):
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))

    env = make_env(environment_id, max_steps=7, cache_dir=tmp_path)

    assert isinstance(env, RealEnv)
    assert env.environment_id == environment_id
    assert env.max_steps == 7


def test_make_env_unknown_id_raises_value_error_listing_valid_ids():
    with pytest.raises(ValueError, match="unknown environment id 'twx-zork'") as excinfo:
        make_env("twx-zork")

    for environment_id in ALL_IDS:
        assert environment_id in str(excinfo.value)


def test_make_env_passes_params_and_cache_dir_to_the_adapter(tmp_path):
    twx = make_env("twx-coin", numLocations=3)
    tw = make_env("tw-coin_collector", cache_dir=tmp_path, level=7)

    assert isinstance(twx, TWXEnv) and twx.game_params["numLocations"] == 3
    assert isinstance(tw, TextWorldEnv) and tw.params == {"level": 7}
    assert tw.cache_dir == tmp_path


def test_make_env_builds_the_new_adapters_with_their_params(tmp_path):
    science = make_env("sw-lifespan-longest-lived", max_actions=12)
    alfworld = make_env("alfworld-heat", cache_dir=tmp_path)
    official = make_env("alfworld-official", data_dir=tmp_path, eval_folder="valid_seen")
    shop = make_env("webshop", base_url="http://shop.test:3000", num_goals=12087)

    assert isinstance(science, ScienceWorldEnv) and science.max_actions == 12
    assert science.task == "lifespan-longest-lived"
    assert isinstance(alfworld, AlfWorldEnv) and alfworld.task == "heat"
    assert alfworld.cache_dir == tmp_path
    assert isinstance(official, AlfWorldDataEnv) and official.folders["eval"] == "valid_seen"
    assert isinstance(shop, WebShopEnv) and shop.base_url == "http://shop.test:3000"
    with pytest.raises(TypeError):
        make_env("alfworld-pick", numLocations=3)


def test_make_env_default_max_steps_per_environment():
    assert make_env("twx-coin").max_steps == 30
    assert make_env("twx-twc").max_steps == 20
    assert make_env("tw-cooking").max_steps == 20
    assert make_env("sw-find-non-living-thing").max_steps == 15
    assert make_env("alfworld-pick").max_steps == 20
    assert make_env("alfworld-official", data_dir="/nonexistent").max_steps == 50
    assert make_env("webshop").max_steps == 15


def test_describe_environments_covers_every_id_and_cli_lists_them():
    described = describe_environments()

    result = CliRunner().invoke(app, ["envs"])

    assert list(described) == ALL_IDS
    assert result.exit_code == 0
    for line, (environment_id, source) in zip(
        result.output.splitlines(), described.items(), strict=True
    ):
        assert line.split()[0] == environment_id and line.endswith(source)


def test_envs_public_api_is_listed_in_dunder_all():
    assert set(dreamgym.envs.__all__) >= {"make_env", "list_environments", "seeds", "TWXEnv"}
    for name in dreamgym.envs.__all__:
        assert hasattr(dreamgym.envs, name)


def test_import_dreamgym_envs_does_not_import_the_game_engines():
    code = (
        "import sys, dreamgym.envs; "
        "engines = ('textworld', 'py4j', 'jericho', 'scienceworld', 'alfworld', 'bs4'); "
        "print(sorted(m for m in sys.modules if m.startswith(engines)))"
    )

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "[]"
