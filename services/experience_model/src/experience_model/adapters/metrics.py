"""Prometheus metrics of the serving layer (``GET /metrics``).

One :class:`ServingMetrics` per app, on its own :class:`~prometheus_client.CollectorRegistry`
(several apps in one test process never collide). It is the :class:`StepObserver` of the
episode service and reads the rest at scrape time:

- ``experience_model_steps_total{outcome}`` (counter): finished steps by outcome (``ok``,
  ``malformed_transition``, ``step_timeout``, ``capacity_reached``, ``cancelled``...);
  steps/s is its ``rate()``;
- ``experience_model_step_latency_seconds`` (histogram): wall time of steps that reached the
  model (ok, 502, 504);
- ``experience_model_batch_size`` (histogram): steps per model batch;
- ``experience_model_queue_depth`` (gauge): steps waiting for a batch;
- ``experience_model_live_episodes`` (gauge): live episodes in the store;
- ``experience_model_parse_failures_total`` (counter): unparseable completions (each attempt);
- ``experience_model_generated_tokens_total`` (counter): completion tokens; tokens/s is its
  ``rate()``;
- ``process_*``: resident memory, CPU seconds, open fds of the server process.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["CONTENT_TYPE_LATEST", "MODEL_OUTCOMES", "ServingMetrics"]

logger = logging.getLogger(__name__)

# Outcomes of steps that went through the model (their latency is the serving latency).
MODEL_OUTCOMES = frozenset({"ok", "malformed_transition", "step_timeout"})
LATENCY_BUCKETS_S = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
)  # fmt: skip
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


def _safe(read: Callable[[], float]) -> Callable[[], float]:
    """A reader that answers NaN instead of failing the whole scrape (e.g. Redis down)."""

    def wrapped() -> float:
        try:
            return float(read())
        except Exception:
            logger.warning("metric reader failed", exc_info=True)
            return math.nan

    return wrapped


class _CumulativeCounters(Collector):
    """Counters kept by the domain objects as plain running integers, exported at scrape time."""

    def __init__(self, readers: dict[str, tuple[str, Callable[[], float]]]) -> None:
        self._readers = readers

    def collect(self) -> Iterator[Metric]:
        for name, (doc, read) in self._readers.items():
            yield CounterMetricFamily(name, doc, value=read())


class ServingMetrics:
    """The experience model's Prometheus metrics.

    Args:
        queue_depth: reads the batcher's queue depth (steps).
        live_episodes: reads the number of live episodes.
        parse_failures: reads the running count of unparseable completions.
        generated_tokens: reads the running count of generated completion tokens.
    """

    def __init__(
        self,
        *,
        queue_depth: Callable[[], float],
        live_episodes: Callable[[], float],
        parse_failures: Callable[[], float],
        generated_tokens: Callable[[], float],
    ) -> None:
        self.registry = CollectorRegistry()
        self.steps = Counter(
            "experience_model_steps",
            "Finished episode steps by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.steps.labels(outcome="ok")
        self.step_latency = Histogram(
            "experience_model_step_latency_seconds",
            "Wall time of steps that reached the model (ok, malformed, timed out).",
            buckets=LATENCY_BUCKETS_S,
            registry=self.registry,
        )
        self.batch_size = Histogram(
            "experience_model_batch_size",
            "Steps per model batch.",
            buckets=BATCH_BUCKETS,
            registry=self.registry,
        )
        Gauge(
            "experience_model_queue_depth",
            "Steps waiting for a model batch.",
            registry=self.registry,
        ).set_function(_safe(queue_depth))
        Gauge(
            "experience_model_live_episodes",
            "Live episodes in the episode store.",
            registry=self.registry,
        ).set_function(_safe(live_episodes))
        self.registry.register(
            _CumulativeCounters(
                {
                    "experience_model_parse_failures": (
                        "Unparseable experience-model completions (every attempt counts).",
                        _safe(parse_failures),
                    ),
                    "experience_model_generated_tokens": (
                        "Generated completion tokens.",
                        _safe(generated_tokens),
                    ),
                }
            )
        )
        ProcessCollector(registry=self.registry)

    def step_finished(self, outcome: str, latency_s: float) -> None:
        """Count a finished step; time it when it went through the model."""
        self.steps.labels(outcome=outcome).inc()
        if outcome in MODEL_OUTCOMES:
            self.step_latency.observe(latency_s)

    def batch_formed(self, size: int) -> None:
        """Record the size of a model batch."""
        self.batch_size.observe(size)

    def render(self) -> bytes:
        """The metrics in the Prometheus text format (``CONTENT_TYPE_LATEST``)."""
        return generate_latest(self.registry)
