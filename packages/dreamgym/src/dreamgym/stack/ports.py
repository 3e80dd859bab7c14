"""Free loopback ports for local stacks, benchmarks and integration tests."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now (not reserved: bind it soon)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
