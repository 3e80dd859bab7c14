"""Process-wide count of real environment steps (auditing real-interaction budgets).

Every real adapter calls :func:`record_real_step` once per ``step``. A job that must not touch the
real environment (DreamGym RL) reads :func:`real_steps_total` before and after and reports the
difference, so "0 real interactions during RL" is measured, not assumed.
"""

from __future__ import annotations

import threading

__all__ = ["real_steps_total", "record_real_step"]

_lock = threading.Lock()
_total = 0


def record_real_step(n: int = 1) -> None:
    """Count ``n`` real environment steps taken in this process."""
    global _total
    with _lock:
        _total += n


def real_steps_total() -> int:
    """Real environment steps taken in this process so far."""
    with _lock:
        return _total
