"""Resources a job used: wall-clock, CPU and GPU time (for cost columns of experiment tables).

>>> meter = UsageMeter()
>>> sorted(meter.read())
['cpu_s', 'gpu_s', 'peak_rss_mb', 'wall_s']

- ``wall_s``: seconds since the meter started (``time.perf_counter``).
- ``cpu_s``: user + system CPU seconds of this process and its descendants since the meter
  started: live descendants (e.g. the JVM of a TextWorldExpress game) are read with ``psutil``,
  finished ones through the ``children_*`` times of their (waited-for) parent. Every thread of a
  process counts, so ``cpu_s`` may exceed ``wall_s`` on several cores.
- ``gpu_s``: wall seconds during which this process held an initialised CUDA context (``None``
  when it never initialised CUDA). It is an upper bound on GPU busy time; no finer per-process
  accounting exists without a profiler.
- ``peak_rss_mb``: the process's peak resident set size (``ru_maxrss``), MiB.
"""

from __future__ import annotations

import resource
import sys
import time
from collections.abc import Iterable
from typing import Any

__all__ = ["UsageMeter", "cpu_seconds", "processes_cpu_seconds"]


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and all of its descendants so far.

    Descendants that already exited count once their parent has waited for them.
    """
    import psutil  # noqa: PLC0415 - keeps ``import dreamgym`` light

    total = 0.0
    try:
        me = psutil.Process()
        procs = [me, *me.children(recursive=True)]
    except psutil.Error:  # pragma: no cover - the process table is unreadable
        t = resource.getrusage(resource.RUSAGE_SELF)
        c = resource.getrusage(resource.RUSAGE_CHILDREN)
        return t.ru_utime + t.ru_stime + c.ru_utime + c.ru_stime
    for proc in procs:
        try:
            t = proc.cpu_times()
        except psutil.Error:  # exited between listing and reading: its parent will count it
            continue
        total += t.user + t.system + t.children_user + t.children_system
    return float(total)


def processes_cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds of the given processes themselves (children excluded).

    Used to attribute the work services do for a job (e.g. the experience model serving
    imagined steps) without counting job processes a service may have spawned. A process that
    is gone counts 0.
    """
    import psutil  # noqa: PLC0415

    total = 0.0
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return float(total)


def _cuda_initialised() -> bool:
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.cuda.is_initialized())
    except Exception:  # pragma: no cover - a broken CUDA install
        return False


class UsageMeter:
    """Measure the resources used from construction until :meth:`read` (see module doc)."""

    def __init__(self) -> None:
        self._wall0 = time.perf_counter()
        self._cpu0 = cpu_seconds()

    def read(self) -> dict[str, Any]:
        """``{wall_s, cpu_s, gpu_s, peak_rss_mb}`` since construction (JSON-ready)."""
        wall = time.perf_counter() - self._wall0
        rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        return {
            "wall_s": round(wall, 3),
            "cpu_s": round(max(0.0, cpu_seconds() - self._cpu0), 3),
            "gpu_s": round(wall, 3) if _cuda_initialised() else None,
            "peak_rss_mb": round(rss_kb / 1024.0, 1),
        }
