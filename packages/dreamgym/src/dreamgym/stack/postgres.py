"""A real local PostgreSQL 16 + pgvector server without Docker or system packages.

Uses the server binaries bundled in the ``pgserver`` wheel (PostgreSQL 16.2 + pgvector 0.6.2)
but runs them ourselves on a loopback **TCP port** (``pgserver`` itself only listens on a Unix
socket), so every service connects with an ordinary ``postgresql://`` URL. PostgreSQL refuses to
run as root: when started by root the server runs as an unprivileged ``pgserver`` user.

>>> pg = LocalPostgres(Path(".dreamgym/pg"), port=55432)
>>> pg.start(); pg.create_database("replay", extensions=["vector"])  # doctest: +SKIP
>>> pg.url("replay")  # doctest: +SKIP
'postgresql+psycopg://postgres@127.0.0.1:55432/replay'
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

__all__ = ["LocalPostgres"]

_SYSTEM_USER = "pgserver"


def _bin_dir() -> Path:
    from pgserver._commands import POSTGRES_BIN_PATH  # noqa: PLC0415 - optional dependency

    return Path(POSTGRES_BIN_PATH)


class LocalPostgres:
    """Start/stop a PostgreSQL server in ``data_dir`` listening on ``host:port``.

    Args:
        data_dir: cluster directory (created and initialised on first start).
        port: TCP port to listen on.
        host: listen address (loopback by default).
    """

    def __init__(self, data_dir: Path, port: int = 55432, host: str = "127.0.0.1") -> None:
        self.data_dir = Path(data_dir).resolve()
        self.port = port
        self.host = host
        # PostgreSQL refuses to run as root: run its binaries as an unprivileged user then.
        self._user: str | None = _SYSTEM_USER if os.geteuid() == 0 else None

    # -- process management -------------------------------------------------------------------
    def _run(self, exe: str, args: list[str], timeout: float = 60.0) -> str:
        cmd = [str(_bin_dir() / exe), *args]
        kwargs: dict[str, object] = {}
        if self._user is not None:
            kwargs["user"] = self._user
        proc = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            **kwargs,  # type: ignore[call-overload]
        )
        if proc.returncode != 0:
            raise RuntimeError(f"{exe} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
        return str(proc.stdout)

    def _prepare_permissions(self) -> None:
        if os.geteuid() != 0:
            return
        import pwd  # noqa: PLC0415

        from pgserver.utils import (  # noqa: PLC0415
            ensure_folder_permissions,
            ensure_prefix_permissions,
            ensure_user_exists,
        )

        ensure_user_exists(_SYSTEM_USER)
        bin_dir = _bin_dir()
        ensure_prefix_permissions(bin_dir)
        ensure_folder_permissions(bin_dir, 0o055)
        ensure_folder_permissions(bin_dir.parent / "lib", 0o044)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        ensure_prefix_permissions(self.data_dir)
        entry = pwd.getpwnam(_SYSTEM_USER)
        for path in [self.data_dir, *self.data_dir.rglob("*")]:
            os.chown(path, entry.pw_uid, entry.pw_gid)

    @property
    def log_file(self) -> Path:
        """Server log (inside the data directory's parent so initdb sees an empty dir)."""
        return self.data_dir.parent / f"{self.data_dir.name}.log"

    def is_running(self) -> bool:
        """True when ``pg_ctl status`` reports a running server for ``data_dir``."""
        if not (self.data_dir / "PG_VERSION").exists():
            return False
        try:
            self._run("pg_ctl", ["-D", str(self.data_dir), "status"], timeout=10)
            return True
        except RuntimeError:
            return False

    def start(self, timeout_s: float = 60.0) -> LocalPostgres:
        """Initialise the cluster if needed and start the server; idempotent.

        Raises:
            RuntimeError: initdb or pg_ctl failed (the message holds PostgreSQL's stderr).
        """
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._prepare_permissions()
        if not (self.data_dir / "PG_VERSION").exists():
            self._run(
                "initdb",
                ["-D", str(self.data_dir), "-U", "postgres", "--auth=trust", "--encoding=UTF8"],
            )
        if self.is_running():
            self.port = self._running_port() or self.port
            return self
        self.log_file.touch()
        if self._user is not None:
            import pwd  # noqa: PLC0415

            entry = pwd.getpwnam(self._user)
            os.chown(self.log_file, entry.pw_uid, entry.pw_gid)
        opts = f"-h {self.host} -p {self.port} -k {self.data_dir}"
        self._run(
            "pg_ctl",
            ["-D", str(self.data_dir), "-o", opts, "-l", str(self.log_file), "-w", "start"],
            timeout=timeout_s,
        )
        self._wait_accepting(timeout_s)
        return self

    def _running_port(self) -> int | None:
        """Port of the server already running on ``data_dir`` (line 4 of postmaster.pid)."""
        try:
            lines = (self.data_dir / "postmaster.pid").read_text().splitlines()
            return int(lines[3])
        except (OSError, IndexError, ValueError):
            return None

    def _wait_accepting(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                self._run("pg_isready", ["-h", self.host, "-p", str(self.port)], timeout=5)
                return
            except RuntimeError:
                time.sleep(0.2)
        raise RuntimeError(f"PostgreSQL on {self.host}:{self.port} not accepting connections")

    def stop(self) -> None:
        """Stop the server (fast shutdown); no-op when it is not running."""
        if self.is_running():
            self._run("pg_ctl", ["-D", str(self.data_dir), "-m", "fast", "-w", "stop"])

    # -- databases ----------------------------------------------------------------------------
    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run SQL through the bundled ``psql`` and return its output."""
        return self._run(
            "psql",
            [
                "-h",
                self.host,
                "-p",
                str(self.port),
                "-U",
                "postgres",
                "-d",
                database,
                "-v",
                "ON_ERROR_STOP=1",
                "-qAt",
                "-c",
                sql,
            ],
        )

    def create_database(self, name: str, extensions: tuple[str, ...] | list[str] = ()) -> None:
        """Create database ``name`` if missing and enable ``extensions`` in it."""
        exists = self.psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'").strip()
        if not exists:
            self.psql(f'CREATE DATABASE "{name}"')
        for ext in extensions:
            self.psql(f'CREATE EXTENSION IF NOT EXISTS "{ext}"', database=name)

    def drop_database(self, name: str) -> None:
        """Drop database ``name`` if it exists (terminating its connections)."""
        self.psql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def url(self, database: str = "postgres", driver: str = "postgresql+psycopg") -> str:
        """SQLAlchemy URL of ``database`` on this server."""
        return f"{driver}://postgres@{self.host}:{self.port}/{database}"
