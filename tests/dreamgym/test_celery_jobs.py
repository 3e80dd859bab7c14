"""Jobs on Celery: a real Redis, real ``celery worker`` processes, the CeleryJobRunner API.

Workers run ``celery -A dreamgym.celery_app:app worker`` (started by
:class:`dreamgym.stack.workers.CeleryWorker`) with this directory on their ``PYTHONPATH``, so the
targets in ``jobs_targets.py`` run in the workers' pool processes. Short lock TTL, grace period,
visibility timeout and backoff keep the fault tests to seconds. Each test's runner has its own
namespace, so listings see only its jobs.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from dreamgym.celery_app import RUN_JOB
from dreamgym.celery_runner import CeleryJobRunner
from dreamgym.errors import ConflictError, InvalidRequestError, NotFoundError
from dreamgym.jobs import JobRecord
from dreamgym.stack.workers import CeleryWorker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

HERE = Path(__file__).parent
KINDS = {
    name: f"jobs_targets:{name}"
    for name in (
        "succeed",
        "fail",
        "wait_for_cancel",
        "sleep_forever",
        "touch_marker",
        "count_with_checkpoint",
        "flaky",
        "exclusive",
    )
}
FINAL = {"succeeded", "failed", "cancelled"}
MAX_RETRIES = 2


def positive_x(config: dict) -> dict:
    if not isinstance(config.get("x"), int) or config["x"] <= 0:
        raise InvalidRequestError("x must be a positive integer", param="config.x")
    return {**config, "validated": True}


def route(kind: str, config: dict) -> str:
    return "gpu" if kind in ("count_with_checkpoint", "succeed") else "cpu"


def worker_env(broker_url: str) -> dict[str, str]:
    return {
        "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
        "DREAMGYM_CELERY_BROKER_URL": broker_url,
        "DREAMGYM_CELERY_JOB_MODULES": "jobs_targets",
        "DREAMGYM_CELERY_LOCK_TTL_S": "2",
        "DREAMGYM_CELERY_CANCEL_GRACE_S": "1",
        "DREAMGYM_CELERY_VISIBILITY_TIMEOUT_S": "3",
        "DREAMGYM_CELERY_MAX_RETRIES": str(MAX_RETRIES),
        "DREAMGYM_CELERY_RETRY_BACKOFF_S": "0.5",
    }


def start_workers(broker_url: str, log_dir: Path, *names: str) -> list[CeleryWorker]:
    workers = [
        CeleryWorker(
            f"{name}-{uuid.uuid4().hex[:6]}",
            ["gpu", "cpu"],
            env=worker_env(broker_url),
            log_path=log_dir / f"{name}.log",
        ).start()
        for name in names
    ]
    for worker in workers:
        worker.wait_ready(broker_url)
    return workers


def empty_db_url(redis_server: object, db: int) -> str:
    url = redis_server.url(db)  # type: ignore[attr-defined]
    redis.Redis.from_url(url).flushdb()
    return url


@pytest.fixture(scope="module")
def broker_url(redis_server: object) -> Iterator[str]:
    url = empty_db_url(redis_server, 5)
    yield url
    redis.Redis.from_url(url).flushdb()


@pytest.fixture(scope="module")
def workers(broker_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list]:
    started = start_workers(broker_url, tmp_path_factory.mktemp("worker-logs"), "w1", "w2")
    yield started
    for worker in started:
        worker.kill()


def make_runner(root: Path, broker_url: str, namespace: str | None = None) -> CeleryJobRunner:
    return CeleryJobRunner(
        root,
        KINDS,
        {"succeed": positive_x},
        broker_url=broker_url,
        namespace=namespace or f"test-{uuid.uuid4().hex[:8]}",
        route=route,
    )


@pytest.fixture()
def runner(tmp_path: Path, broker_url: str, workers: list) -> Iterator[CeleryJobRunner]:
    r = make_runner(tmp_path / "jobs", broker_url)
    yield r
    r.shutdown()


def wait_for(
    runner: CeleryJobRunner,
    job_id: str,
    states: set[str],
    timeout_s: float = 90.0,
    *,
    progress: float = 0.0,
) -> JobRecord:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        record = runner.get(job_id)
        if record.state in states and record.progress >= progress:
            return record
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} still {runner.get(job_id)}, wanted {states}")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until_messages_settled(broker_url: str, timeout_s: float = 60.0) -> None:
    """Until no job message is queued or held unacknowledged by a worker."""
    client = redis.Redis.from_url(broker_url)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pending = client.llen("gpu") + client.llen("cpu") + client.zcard("unacked_index")
        if pending == 0:
            return
        time.sleep(0.2)
    raise AssertionError("job messages still pending")


# -- submit, read, list ------------------------------------------------------------------------


def test_job_runs_on_a_worker_and_any_replica_reads_its_result(runner, broker_url, tmp_path):
    submitted = runner.submit("succeed", {"x": 21})

    record = wait_for(runner, submitted.job_id, FINAL)
    other_replica = make_runner(tmp_path / "jobs", broker_url, namespace=runner.namespace)
    seen_elsewhere = other_replica.get(submitted.job_id)
    other_replica.shutdown()

    assert submitted.state == "queued"
    assert record.state == "succeeded", record.error
    assert record.result["doubled"] == 42
    assert record.result["pid"] != os.getpid()  # ran in a worker's pool process
    assert record.worker and record.worker.split("@")[0].startswith(("w1", "w2"))
    assert record.config == {"x": 21, "validated": True}
    assert (record.progress, record.attempts) == (1.0, 1)
    assert record.checkpoint == str(runner.root / submitted.job_id / "ckpt")
    assert record.metrics["loss"] == 0.5 and record.metrics["step"] == 1
    assert [(r["step"], r["loss"]) for r in runner.metrics(submitted.job_id)] == [
        (0, 1.0),
        (1, 0.5),
    ]
    assert (runner.root / submitted.job_id / "job.log").exists()
    assert seen_elsewhere == record
    assert record.usage is not None and record.usage["wall_s"] > 0


def test_list_filters_by_state_newest_first(runner):
    ok = runner.submit("succeed", {"x": 2})
    bad = runner.submit("fail", {"why": "on purpose"})
    for job in (ok, bad):
        wait_for(runner, job.job_id, FINAL)

    everything = runner.list()

    assert [r.job_id for r in runner.list(state="failed")] == [bad.job_id]
    assert [r.job_id for r in runner.list(state="succeeded")] == [ok.job_id]
    assert runner.list(state="running") == []
    assert [r.job_id for r in everything] == [bad.job_id, ok.job_id]


def test_submit_invalid_config_raises_naming_the_field_and_records_nothing(runner):
    with pytest.raises(InvalidRequestError) as info:
        runner.submit("succeed", {"x": -1})

    assert info.value.param == "config.x"
    assert runner.list() == []


def test_job_target_outside_the_allowed_modules_is_refused_by_the_worker(runner):
    runner.kinds["shell"] = "os:system"  # a forged registration: workers only import job modules

    record = wait_for(runner, runner.submit("shell", {}).job_id, FINAL)

    assert record.state == "failed"
    assert "outside the allowed modules ['jobs_targets']" in record.error


def test_submit_unknown_kind_raises_naming_kind(runner):
    with pytest.raises(InvalidRequestError) as info:
        runner.submit("nope", {})

    assert info.value.param == "kind"


def test_unknown_job_is_not_found(runner):
    for call in (runner.get, runner.cancel, runner.metrics):
        with pytest.raises(NotFoundError):
            call("job-missing")


# -- failures and retries ------------------------------------------------------------------------


def test_job_error_fails_at_once_with_its_message(runner):
    submitted = runner.submit("fail", {"why": "bad input"})

    record = wait_for(runner, submitted.job_id, FINAL)

    assert record.state == "failed"
    assert "RuntimeError: job exploded on purpose: bad input" in record.error
    assert record.attempts == 1  # not a transient error: no retry
    assert record.result is None


def test_transient_error_is_retried_and_the_job_succeeds(runner):
    submitted = runner.submit("flaky", {"failures": 1})

    record = wait_for(runner, submitted.job_id, FINAL)

    assert record.state == "succeeded", record.error
    assert record.result == {"attempt": 2}
    assert record.attempts == 2


def test_transient_errors_give_up_after_max_retries(runner):
    submitted = runner.submit("flaky", {"failures": 100})

    record = wait_for(runner, submitted.job_id, FINAL)

    assert record.state == "failed"
    assert record.attempts == MAX_RETRIES + 1
    assert f"service unreachable (attempt {MAX_RETRIES + 1})" in record.error
    counter = runner.root / submitted.job_id / "attempts"
    assert counter.read_text() == str(MAX_RETRIES + 1)


# -- cancellation ----------------------------------------------------------------------------------


def test_cancel_running_job_stops_it_within_seconds(runner):
    submitted = runner.submit("wait_for_cancel", {"timeout_s": 60.0})
    wait_for(runner, submitted.job_id, {"running"}, progress=0.1)

    start = time.monotonic()
    runner.cancel(submitted.job_id)
    record = wait_for(runner, submitted.job_id, FINAL, timeout_s=30.0)

    assert record.state == "cancelled"
    assert time.monotonic() - start < 5.0
    assert record.result is None


def test_cancel_job_ignoring_cancellation_is_terminated_and_the_worker_goes_on(runner):
    submitted = runner.submit("sleep_forever", {})
    running = wait_for(runner, submitted.job_id, {"running"}, progress=0.1)

    start = time.monotonic()
    runner.cancel(submitted.job_id)
    record = wait_for(runner, submitted.job_id, FINAL, timeout_s=30.0)
    deadline = time.monotonic() + 15.0
    while alive(running.pid) and time.monotonic() < deadline:
        time.sleep(0.1)

    assert record.state == "cancelled"
    assert time.monotonic() - start < 15.0
    assert not alive(running.pid)  # revoke(terminate=True) ended the pool process
    after = runner.submit("succeed", {"x": 1})
    assert wait_for(runner, after.job_id, FINAL).state == "succeeded"


def test_cancel_queued_job_never_runs_its_body(runner, tmp_path):
    blockers = [runner.submit("wait_for_cancel", {"timeout_s": 60.0}) for _ in range(2)]
    for job in blockers:
        wait_for(runner, job.job_id, {"running"}, progress=0.1)  # both workers busy
    marker = tmp_path / "ran"
    queued = runner.submit("touch_marker", {"marker": str(marker)})

    cancelled = runner.cancel(queued.job_id)
    for job in blockers:
        runner.cancel(job.job_id)
        wait_for(runner, job.job_id, FINAL)
    time.sleep(3.0)  # the workers are free: a message that was not discarded would run now

    assert cancelled.state == "cancelled"
    assert runner.get(queued.job_id).state == "cancelled"
    assert not marker.exists()


def test_cancel_finished_job_is_conflict(runner):
    submitted = runner.submit("succeed", {"x": 1})
    wait_for(runner, submitted.job_id, FINAL)

    with pytest.raises(ConflictError) as info:
        runner.cancel(submitted.job_id)

    assert "succeeded" in info.value.message


# -- at most one run at a time -------------------------------------------------------------------


def test_duplicate_deliveries_never_run_a_job_twice_at_once(runner, broker_url):
    submitted = runner.submit("exclusive", {"seconds": 3.0})
    wait_for(runner, submitted.job_id, {"running"})
    message = {
        "namespace": runner.namespace,
        "job_id": submitted.job_id,
        "target": KINDS["exclusive"],
        "root": str(runner.root),
        "queue": "cpu",
    }
    for _ in range(2):  # e.g. a message restored after its visibility timeout
        runner.app.send_task(RUN_JOB, kwargs=message, task_id=submitted.job_id, queue="cpu")

    record = wait_for(runner, submitted.job_id, FINAL)
    wait_until_messages_settled(broker_url)
    workdir = runner.root / submitted.job_id

    assert record.state == "succeeded", record.error
    assert not (workdir / "overlap").exists()
    assert len((workdir / "runs.log").read_text().split()) == 1  # the body ran exactly once
    assert record.attempts == 1


# -- lost workers ----------------------------------------------------------------------------------


def test_job_of_a_killed_worker_resumes_from_its_checkpoint_on_a_new_worker(redis_server, tmp_path):
    broker = empty_db_url(redis_server, 6)
    started = start_workers(broker, tmp_path / "logs", "first")
    runner = make_runner(tmp_path / "jobs", broker)
    try:
        submitted = runner.submit("count_with_checkpoint", {"n": 30, "step_s": 0.2})
        before = wait_for(runner, submitted.job_id, {"running"}, progress=0.3)

        started[0].kill()  # the whole worker, pool included: its message stays unacknowledged
        killed_at = json.loads((runner.root / submitted.job_id / "counter.json").read_text())
        assert runner.get(submitted.job_id).state == "running"
        started += start_workers(broker, tmp_path / "logs", "second")
        record = wait_for(runner, submitted.job_id, FINAL, timeout_s=120.0)
        runner_metrics = runner.metrics(submitted.job_id)
    finally:
        runner.shutdown()
        for worker in started:
            worker.kill()

    assert record.state == "succeeded", record.error
    assert record.result["count"] == 30
    assert record.result["starts"] == [0, killed_at["count"]]  # resumed, did not start over
    assert record.result["resumed_from"] >= 9
    assert record.attempts == 2
    steps = [row["step"] for row in runner_metrics]
    assert steps == list(range(1, 31))  # steps redone after the resume appear once
    assert before.worker.startswith("first") and record.worker.startswith("second")


def test_job_of_a_killed_pool_process_is_requeued_and_resumes(runner):
    submitted = runner.submit("count_with_checkpoint", {"n": 25, "step_s": 0.2})
    running = wait_for(runner, submitted.job_id, {"running"}, progress=0.2)

    os.kill(running.pid, 9)  # the job's process dies (e.g. out of memory); its worker lives
    record = wait_for(runner, submitted.job_id, FINAL, timeout_s=120.0)

    assert record.state == "succeeded", record.error
    assert record.result["count"] == 25
    assert record.result["starts"][0] == 0 and record.result["starts"][1] >= 5
    assert len(record.result["starts"]) == 2
    assert record.attempts == 2
    assert record.pid != running.pid
    assert [row["step"] for row in runner.metrics(submitted.job_id)] == list(range(1, 26))
