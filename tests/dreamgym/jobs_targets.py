"""Job targets for tests/dreamgym/test_jobs.py (spawned child processes) and
tests/dreamgym/test_celery_jobs.py (Celery worker processes, which get this directory on their
``PYTHONPATH`` and ``jobs_targets`` in ``DREAMGYM_CELERY_JOB_MODULES``).

A spawned child does not inherit the parent's imported modules, only ``sys.path`` (multiprocessing
sends it with the preparation data), so the test prepends this directory to ``sys.path`` before the
runner starts a job and names targets ``"jobs_targets:<function>"``. Nothing here imports pytest
or the test module, so the child stays cheap to start.
"""

from __future__ import annotations

import json
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


def count_with_checkpoint(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Count to ``n`` (one step every ``step_s``), logging the count as a metric and then
    checkpointing it after every step.

    A redelivered job resumes from ``counter.json``; ``starts`` lists the count each attempt
    started from (``[0]`` when it ran once, ``[0, k]`` when it resumed at ``k``).
    """
    ckpt = ctx.workdir / "counter.json"
    state = json.loads(ckpt.read_text()) if ckpt.exists() else {"count": 0, "starts": []}
    state["starts"].append(state["count"])
    start = state["count"]
    while state["count"] < config["n"]:
        ctx.raise_if_cancelled()
        time.sleep(config.get("step_s", 0.1))
        state["count"] += 1
        ctx.log_metrics(state["count"], {"count": state["count"]})
        tmp = ckpt.with_suffix(".tmp")
        tmp.write_text(json.dumps(state))
        tmp.replace(ckpt)
        ctx.report(state["count"] / config["n"], f"count {state['count']}", checkpoint=str(ckpt))
    return {"count": state["count"], "resumed_from": start, "starts": state["starts"]}


def flaky(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Raise ``ConnectionError`` (a transient error) on the first ``failures`` attempts."""
    counter = ctx.workdir / "attempts"
    attempt = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(attempt))
    if attempt <= config.get("failures", 1):
        raise ConnectionError(f"service unreachable (attempt {attempt})")
    return {"attempt": attempt}


def exclusive(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Hold ``<workdir>/running`` (created exclusively) for ``seconds``; log each run's pid.

    A second body running at the same time finds the file, leaves ``overlap`` and fails.
    """
    marker = ctx.workdir / "running"
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        (ctx.workdir / "overlap").touch()
        raise RuntimeError("job body ran twice at once") from None
    with (ctx.workdir / "runs.log").open("a") as f:
        f.write(f"{os.getpid()}\n")
    try:
        time.sleep(config.get("seconds", 2.0))
    finally:
        marker.unlink()
    return {"pid": os.getpid()}


def burn_cpu(config: dict[str, Any], ctx: JobContext) -> dict[str, Any]:
    """Spend ``cpu_s`` CPU seconds, in this process or (``in_child``) in a waited-for child."""
    if config.get("in_child"):
        import subprocess  # noqa: PLC0415
        import sys  # noqa: PLC0415

        code = (
            "import time\n"
            f"t = time.process_time() + {config['cpu_s']}\n"
            "while time.process_time() < t: pass\n"
        )
        subprocess.run([sys.executable, "-c", code], check=True)
        return {"where": "child"}
    deadline = time.process_time() + config["cpu_s"]
    while time.process_time() < deadline:
        pass
    return {"where": "self"}
