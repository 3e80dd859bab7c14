"""Environment registry (dreamgym.envs.registry) and the package's public surface."""

from __future__ import annotations

import subprocess
import sys

import pytest

import dreamgym.envs
from dreamgym.envs import RealEnv, TextWorldEnv, TWXEnv, list_environments, make_env

ALL_IDS = ["tw-coin_collector", "tw-cooking", "twx-coin", "twx-cookingworld", "twx-twc"]


def test_list_environments_returns_all_ids_sorted():
    assert list_environments() == ALL_IDS


@pytest.mark.parametrize("environment_id", ALL_IDS)
def test_make_env_known_id_returns_real_env_with_that_id(environment_id, tmp_path):
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


def test_make_env_default_max_steps_per_environment():
    assert make_env("twx-coin").max_steps == 30
    assert make_env("twx-twc").max_steps == 20
    assert make_env("tw-cooking").max_steps == 20


def test_envs_public_api_is_listed_in_dunder_all():
    assert set(dreamgym.envs.__all__) >= {"make_env", "list_environments", "seeds", "TWXEnv"}
    for name in dreamgym.envs.__all__:
        assert hasattr(dreamgym.envs, name)


def test_import_dreamgym_envs_does_not_import_the_game_engines():
    code = (
        "import sys, dreamgym.envs; "
        "print(sorted(m for m in sys.modules if m.startswith(('textworld', 'py4j', 'jericho'))))"
    )

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "[]"
