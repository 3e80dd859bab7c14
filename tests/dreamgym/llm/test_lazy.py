"""Tests of the build-on-first-use backend (dreamgym.llm.lazy.LazyBackend)."""

from __future__ import annotations

import threading
import time

import pytest

from dreamgym.errors import BackendUnavailableError
from dreamgym.llm.base import SamplingParams
from dreamgym.llm.lazy import LazyBackend
from dreamgym.testing.fakes import FakeLLMBackend


class CountingFactory:
    """Builds an echoing fake backend and counts the builds."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.builds = 0
        self.delay_s = delay_s

    def __call__(self) -> FakeLLMBackend:
        time.sleep(self.delay_s)
        self.builds += 1
        return FakeLLMBackend(responder=lambda prompt, params: f"echo {prompt}")


def generate(backend: LazyBackend, prompt: str = "hi") -> str:
    return backend.generate([prompt], [SamplingParams()])[0].text


def test_lazy_backend_does_not_build_until_generate():
    factory = CountingFactory()

    backend = LazyBackend(factory, name="transformers")

    assert factory.builds == 0
    assert backend.loaded is False
    assert backend.name == "transformers"


def test_lazy_backend_builds_once_and_delegates():
    factory = CountingFactory()
    backend = LazyBackend(factory)

    texts = [generate(backend, p) for p in ("a", "b", "c")]

    assert texts == ["echo a", "echo b", "echo c"]
    assert factory.builds == 1
    assert backend.loaded is True


def test_lazy_backend_concurrent_first_calls_build_once():
    factory = CountingFactory(delay_s=0.05)
    backend = LazyBackend(factory)
    results: list[str] = []

    threads = [
        threading.Thread(target=lambda i=i: results.append(generate(backend, str(i))))
        for i in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert factory.builds == 1
    assert sorted(results) == sorted(f"echo {i}" for i in range(8))


def test_lazy_backend_missing_checkpoint_is_503_without_building(tmp_path):
    factory = CountingFactory()
    path = tmp_path / "checkpoint"
    backend = LazyBackend(factory, requires_path=str(path))

    with pytest.raises(BackendUnavailableError) as info:
        generate(backend)

    assert info.value.status_code == 503
    assert info.value.retry_after_s and info.value.retry_after_s > 0
    assert str(path) in info.value.message
    assert factory.builds == 0 and backend.loaded is False


def test_lazy_backend_directory_without_config_is_still_503(tmp_path):
    factory = CountingFactory()
    (tmp_path / "weights.safetensors").write_bytes(b"")
    backend = LazyBackend(factory, requires_path=str(tmp_path))

    with pytest.raises(BackendUnavailableError):
        generate(backend)

    assert factory.builds == 0


def test_lazy_backend_builds_once_checkpoint_appears(tmp_path):
    factory = CountingFactory()
    backend = LazyBackend(factory, requires_path=str(tmp_path))
    with pytest.raises(BackendUnavailableError):
        generate(backend)

    (tmp_path / "config.json").write_text("{}")

    assert generate(backend, "now") == "echo now"
    assert generate(backend, "again") == "echo again"
    assert factory.builds == 1


def test_lazy_backend_factory_failure_propagates_and_retries_next_call():
    attempts = []

    def flaky():
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("disk not mounted yet")
        return FakeLLMBackend(responder=lambda prompt, params: "ok")

    backend = LazyBackend(flaky)
    with pytest.raises(OSError):
        generate(backend)

    assert generate(backend) == "ok"
    assert len(attempts) == 2
