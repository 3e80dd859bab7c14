"""Team-related settings of the experience model, read from ``EXPERIENCE_MODEL_*`` variables."""

from __future__ import annotations

import pydantic
import pytest

from experience_model.settings import Settings


def test_admin_teams_is_a_comma_list_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("EXPERIENCE_MODEL_ADMIN_TEAMS", " ops, lab-a ,")
    monkeypatch.setenv("EXPERIENCE_MODEL_MAX_LIVE_EPISODES_PER_TEAM", "50")
    monkeypatch.setenv("EXPERIENCE_MODEL_QUOTA_RETRY_AFTER_S", "12.5")

    settings = Settings(data_dir=tmp_path)

    assert settings.admin_teams == frozenset({"ops", "lab-a"})
    assert settings.max_live_episodes_per_team == 50
    assert settings.quota_retry_after_s == 12.5


def test_defaults_keep_the_single_user_service(tmp_path):
    settings = Settings(data_dir=tmp_path)

    assert settings.admin_teams == frozenset({"default"})
    assert settings.max_live_episodes_per_team is None
    assert settings.max_active_jobs_per_team is None


@pytest.mark.parametrize(
    ("field", "value"),
    [("admin_teams", "ops,Not A Team"), ("max_live_episodes_per_team", 0)],
)
def test_invalid_team_settings_are_refused_naming_the_field(tmp_path, field, value):
    with pytest.raises(pydantic.ValidationError, match=field):
        Settings(data_dir=tmp_path, **{field: value})
