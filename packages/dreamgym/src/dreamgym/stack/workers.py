"""Celery worker processes of the local stack (and of integration tests).

Each worker is ``python -m celery -A dreamgym.celery_app:app worker -Q <queues>`` in its own
process group (its prefork pool children included), configured through ``DREAMGYM_CELERY_*``
environment variables (:class:`dreamgym.celery_app.CelerySettings`) and logging to a file.

>>> w = CeleryWorker("gpu", ["gpu"], env={"DREAMGYM_CELERY_BROKER_URL": url}, log_path=p)
>>> w.start().wait_ready(url)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["CeleryWorker", "worker_command"]

APP = "dreamgym.celery_app:app"


def worker_command(name: str, queues: Sequence[str], concurrency: int = 1) -> list[str]:
    """The command line of a worker named ``<name>@<host>`` consuming ``queues``."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        APP,
        "worker",
        "-Q",
        ",".join(queues),
        "-n",
        f"{name}@%h",
        "--concurrency",
        str(concurrency),
        "--loglevel",
        "INFO",
        "--without-gossip",
        "--without-mingle",
    ]


class CeleryWorker:
    """Start, wait for and stop one Celery worker process.

    Args:
        name: node name prefix (the node is ``<name>@<hostname>``).
        queues: queues it consumes (``["gpu"]``, ``["cpu"]``, or both).
        env: environment variables added to this process's (``DREAMGYM_CELERY_BROKER_URL``...).
        log_path: file the worker's stdout and stderr are appended to.
        concurrency: pool processes (jobs at once).
        cwd: working directory.
    """

    def __init__(
        self,
        name: str,
        queues: Sequence[str],
        *,
        env: Mapping[str, str],
        log_path: Path,
        concurrency: int = 1,
        cwd: Path | None = None,
    ) -> None:
        self.name, self.queues, self.concurrency = name, list(queues), concurrency
        self.env, self.log_path, self.cwd = dict(env), Path(log_path), cwd
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def nodename(self) -> str:
        """``<name>@<hostname>``, as the worker reports itself."""
        return f"{self.name}@{socket.gethostname()}"

    @property
    def pid(self) -> int:
        """PID of the worker's main process.

        Raises:
            RuntimeError: not started.
        """
        if self.proc is None:
            raise RuntimeError(f"worker {self.name} not started")
        return self.proc.pid

    def start(self) -> CeleryWorker:
        """Start the process (its own process group) and return ``self``."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                worker_command(self.name, self.queues, self.concurrency),
                env={**os.environ, **self.env},
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                start_new_session=True,
            )
        return self

    def wait_ready(self, broker_url: str, timeout_s: float = 120.0) -> None:
        """Wait until the worker answers a ``ping`` over the broker.

        Raises:
            RuntimeError: it exited or did not answer in time (the message points at its log).
        """
        import redis  # noqa: PLC0415
        from kombu.exceptions import OperationalError  # noqa: PLC0415

        from dreamgym.celery_app import CelerySettings, create_celery_app  # noqa: PLC0415

        settings = CelerySettings(broker_url=broker_url)
        app = create_celery_app(settings)
        deadline = time.monotonic() + timeout_s
        last_error: Exception | None = None
        try:
            while time.monotonic() < deadline:
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(
                        f"worker {self.name} exited with code {self.proc.returncode}; "
                        f"see {self.log_path}"
                    )
                try:
                    if app.control.ping(destination=[self.nodename], timeout=1.0):
                        return
                except (OSError, redis.RedisError, OperationalError) as exc:
                    # the broker dropped a connection under us: reconnect with a fresh pool
                    last_error = exc
                    app.close()
                    app = create_celery_app(settings)
                    time.sleep(0.5)
            cause = f" (last broker error: {last_error!r})" if last_error else ""
            raise RuntimeError(
                f"worker {self.name} not ready after {timeout_s:.0f}s{cause}; see {self.log_path}"
            )
        finally:
            app.close()

    def alive(self) -> bool:
        """Whether the main process is still running."""
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the worker and its pool processes (a machine dying: nothing is acknowledged)."""
        self._signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=30)

    def stop(self, timeout_s: float = 20.0) -> None:
        """Warm shutdown (SIGTERM: running jobs may finish), SIGKILL after ``timeout_s``."""
        if not self.alive():
            return
        self._signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout_s)  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            self.kill()

    def _signal(self, sig: int) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)
