"""Tests of the child-process job runner (dreamgym.jobs.LocalJobRunner).

Targets live in ``jobs_targets.py`` next to this file; the ``runner`` fixture puts this directory
on ``sys.path``, which spawned children receive from the parent, so ``"jobs_targets:succeed"``
imports in the child whatever pytest's import mode.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from dreamgym.errors import ConflictError, InvalidRequestError, NotFoundError
from dreamgym.jobs import JobRecord, LocalJobRunner

KINDS = {
    "succeed": "jobs_targets:succeed",
    "fail": "jobs_targets:fail",
    "wait_for_cancel": "jobs_targets:wait_for_cancel",
    "sleep_forever": "jobs_targets:sleep_forever",
    "touch_marker": "jobs_targets:touch_marker",
    "burn_cpu": "jobs_targets:burn_cpu",
}
FINAL = {"succeeded", "failed", "cancelled"}


def positive_x(config: dict) -> dict:
    if not isinstance(config.get("x"), int) or config["x"] <= 0:
        raise InvalidRequestError("x must be a positive integer", param="config.x")
    return {**config, "validated": True}


@pytest.fixture()
def runner(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    r = LocalJobRunner(
        tmp_path / "jobs", KINDS, {"succeed": positive_x}, max_running=4, cancel_grace_s=1.0
    )
    yield r
    r.shutdown()


def wait_for(
    runner: LocalJobRunner, job_id: str, states: set[str], timeout_s: float = 30.0
) -> JobRecord:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        record = runner.get(job_id)
        if record.state in states:
            return record
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} still {runner.get(job_id).state}, wanted {states}")


def wait_until_reaped(runner: LocalJobRunner, job_id: str, timeout_s: float = 30.0) -> None:
    """Wait until the job's child process has exited and the monitor has reaped it."""
    deadline = time.monotonic() + timeout_s
    while job_id in runner._procs:  # the runner's own bookkeeping of live children
        assert time.monotonic() < deadline, f"job {job_id} process still alive"
        time.sleep(0.05)


def test_job_success_records_result_progress_and_metrics(runner):
    submitted = runner.submit("succeed", {"x": 21})

    record = wait_for(runner, submitted.job_id, FINAL)

    assert submitted.state in ("queued", "running")
    assert record.state == "succeeded", record.error
    assert record.result["doubled"] == 42
    assert record.result["pid"] != os.getpid()  # ran in a child process
    assert record.config == {"x": 21, "validated": True}
    assert record.progress == 1.0
    assert record.checkpoint and record.checkpoint.endswith("ckpt")
    assert record.started_at and record.finished_at
    assert record.metrics["loss"] == 0.5 and record.metrics["step"] == 1
    rows = runner.metrics(submitted.job_id)
    assert [(r["step"], r["loss"]) for r in rows] == [(0, 1.0), (1, 0.5)]
    assert (runner.root / submitted.job_id / "metrics.jsonl").exists()


@pytest.mark.parametrize("in_child", [False, True])
def test_job_usage_counts_cpu_of_the_job_and_its_children(runner, in_child):
    submitted = runner.submit("burn_cpu", {"cpu_s": 0.4, "in_child": in_child})

    record = wait_for(runner, submitted.job_id, FINAL)

    assert record.state == "succeeded", record.error
    usage = record.usage or {}
    assert usage["cpu_s"] >= 0.4
    assert usage["wall_s"] > 0 and usage["peak_rss_mb"] > 0
    assert usage["gpu_s"] is None  # never touched CUDA


def test_job_exception_marks_failed_with_error_text(runner):
    submitted = runner.submit("fail", {"why": "bad config"})

    record = wait_for(runner, submitted.job_id, FINAL)

    assert record.state == "failed"
    assert "RuntimeError: job exploded on purpose: bad config" in record.error
    assert record.result is None
    assert record.finished_at


def test_submit_unknown_kind_raises_naming_kind(runner):
    with pytest.raises(InvalidRequestError) as info:
        runner.submit("nope", {})

    assert info.value.param == "kind"
    assert "succeed" in info.value.message
    assert runner.list() == []


def test_submit_validator_error_propagates_and_creates_nothing(runner):
    with pytest.raises(InvalidRequestError) as info:
        runner.submit("succeed", {"x": -1})

    assert info.value.param == "config.x"
    assert runner.list() == []


def test_get_unknown_job_is_not_found(runner):
    with pytest.raises(NotFoundError) as info:
        runner.get("job-missing")

    assert info.value.param == "job_id"


def test_cancel_running_job_ends_cancelled(runner):
    submitted = runner.submit("wait_for_cancel", {"timeout_s": 30.0})
    wait_for(runner, submitted.job_id, {"running"})

    runner.cancel(submitted.job_id)
    start = time.monotonic()
    record = wait_for(runner, submitted.job_id, FINAL, timeout_s=10.0)

    assert record.state == "cancelled"
    assert time.monotonic() - start < 5.0
    assert record.result is None


def test_cancel_job_ignoring_cancellation_is_terminated_after_grace(runner):
    submitted = runner.submit("sleep_forever", {})
    wait_for(runner, submitted.job_id, {"running"})

    runner.cancel(submitted.job_id)
    record = wait_for(runner, submitted.job_id, FINAL, timeout_s=10.0)

    assert record.state == "cancelled"
    assert record.error is None


def test_cancel_queued_job_never_runs_its_body(runner, tmp_path):
    marker = tmp_path / "ran"
    submitted = runner.submit("touch_marker", {"marker": str(marker)})

    cancelled = runner.cancel(submitted.job_id)
    wait_until_reaped(runner, submitted.job_id)

    assert cancelled.state == "cancelled"
    assert runner.get(submitted.job_id).state == "cancelled"
    assert not marker.exists()


def test_cancel_finished_job_is_conflict(runner):
    submitted = runner.submit("succeed", {"x": 1})
    wait_for(runner, submitted.job_id, FINAL)

    with pytest.raises(ConflictError) as info:
        runner.cancel(submitted.job_id)

    assert info.value.param == "job_id"
    assert "succeeded" in info.value.message


def test_killed_job_process_is_marked_failed_with_exit_code(runner):
    submitted = runner.submit("sleep_forever", {})
    running = wait_for(runner, submitted.job_id, {"running"})

    os.kill(running.pid, signal.SIGKILL)
    record = wait_for(runner, submitted.job_id, FINAL, timeout_s=10.0)

    assert record.state == "failed"
    assert "exited with code" in record.error
    assert str(-signal.SIGKILL) in record.error


def test_list_filters_by_state(runner):
    ok = runner.submit("succeed", {"x": 2})
    bad = runner.submit("fail", {})
    for job in (ok, bad):
        wait_for(runner, job.job_id, FINAL)

    failed = runner.list(state="failed")
    everything = runner.list()

    assert [r.job_id for r in failed] == [bad.job_id]
    assert [r.job_id for r in runner.list(state="succeeded")] == [ok.job_id]
    assert {r.job_id for r in everything} == {ok.job_id, bad.job_id}
    assert everything[0].created_at >= everything[1].created_at  # newest first
