"""LocalStack.start_replica: another process of a service (an ablation's experience model)."""

from __future__ import annotations

import httpx
import pytest

from dreamgym.stack.local import LocalStack, StackConfig, _alive
from dreamgym.testing.live import free_port


def test_start_replica_rejects_unknown_services_and_taken_names(tmp_path):
    stack = LocalStack(StackConfig(data_dir=tmp_path))

    with pytest.raises(ValueError, match="unknown service"):
        stack.start_replica("nope", name="x", port=free_port())
    with pytest.raises(ValueError, match="name of a stack service"):
        stack.start_replica("experience_model", name="experience_model", port=free_port())


@pytest.mark.integration
def test_replica_serves_with_its_own_settings_and_down_stops_it(tmp_path):
    stack = LocalStack(StackConfig(data_dir=tmp_path / "stack"))
    (tmp_path / "stack" / "logs").mkdir(parents=True)
    port = free_port()
    try:
        url = stack.start_replica(
            "experience_model",
            name="experience_model_no_replay",
            port=port,
            env={
                "EXPERIENCE_MODEL_BACKEND": "fake",
                "EXPERIENCE_MODEL_REDIS_URL": "",  # episodes in process: no Redis needed
                "EXPERIENCE_MODEL_USE_RETRIEVAL": "false",
                "EXPERIENCE_MODEL_HISTORY_LENGTH": "5",
            },
            timeout_s=120,
        )
        info = httpx.get(f"{url}/v1/model", timeout=10).json()
        pid = stack.service_pids()["experience_model_no_replay"]
    finally:
        stack.down()

    assert url == f"http://127.0.0.1:{port}"
    assert (info["backend"], info["history_length"]) == ("fake", 5)
    assert not _alive(pid)
