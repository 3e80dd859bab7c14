"""dreamgym.usage: wall, CPU (self + children) and per-process CPU."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from dreamgym.usage import UsageMeter, cpu_seconds, processes_cpu_seconds


def burn(seconds: float) -> None:
    deadline = time.process_time() + seconds
    while time.process_time() < deadline:
        pass


def test_usage_meter_counts_this_process_cpu():
    meter = UsageMeter()
    burn(0.2)

    usage = meter.read()

    assert usage["cpu_s"] >= 0.2
    assert usage["wall_s"] >= 0.2 * 0.5  # at least half as long as the CPU burnt on one thread
    assert usage["gpu_s"] is None


def test_usage_meter_counts_finished_children():
    meter = UsageMeter()
    code = "import time\nt = time.process_time() + 0.3\nwhile time.process_time() < t: pass\n"
    subprocess.run([sys.executable, "-c", code], check=True)

    assert meter.read()["cpu_s"] >= 0.3


def test_processes_cpu_seconds_reads_live_processes_and_ignores_gone_ones():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()

    own = processes_cpu_seconds([os.getpid()])

    assert 0 < own <= cpu_seconds() + 1e-6
    assert processes_cpu_seconds([proc.pid]) == 0.0
