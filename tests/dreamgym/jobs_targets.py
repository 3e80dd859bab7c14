"""Job targets for tests/dreamgym/test_jobs.py, run in spawned child processes.

A spawned child does not inherit the parent's imported modules, only ``sys.path`` (multiprocessing
sends it with the preparation data), so the test prepends this directory to ``sys.path`` before the
runner starts a job and names targets ``"jobs_targets:<function>"``. Nothing here imports pytest
or the test module, so the child stays cheap to start.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from dreamgym.jobs import JobContext


def succeed(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Report progress and two metric rows, then return the doubled ``x``."""
    ctx.report(0.5, "half way", {"loss": 2.0})
    for step in range(2):
        ctx.log_metrics(step, {"loss": 1.0 / (step + 1)})
    ctx.report(checkpoint=str(ctx.workdir / "ckpt"))
    return {"doubled": 2 * config["x"], "pid": os.getpid()}


def fail(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Raise with a recognisable message."""
    raise RuntimeError(f"job exploded on purpose: {config.get('why', 'no reason')}")


def wait_for_cancel(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Poll for cancellation (raising JobCancelled) for at most ``timeout_s`` seconds."""
    ctx.report(0.1, "waiting")
    deadline = time.monotonic() + config.get("timeout_s", 30.0)
    while time.monotonic() < deadline:
        ctx.raise_if_cancelled()
        time.sleep(0.05)
    return {"cancelled": False}


def sleep_forever(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Ignore cancellation and never return (until killed)."""
    ctx.report(0.1, "sleeping")
    while True:
        time.sleep(0.1)


def touch_marker(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Create ``config['marker']`` (shows that the job body ran)."""
    Path(config["marker"]).touch()
    return {}
