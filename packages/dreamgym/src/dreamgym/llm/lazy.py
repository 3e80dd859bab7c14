"""A backend that is built on first use.

The task generator shares the experience model's weights (paper §1.3: M_task and M_exp share
parameters). In a fresh deployment those weights appear only after experience-model SFT, so the
task generator points at the checkpoint path and loads it when the first generation request comes;
until the checkpoint exists, generation answers 503 and everything else works.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from dreamgym.errors import BackendUnavailableError
from dreamgym.llm.base import Completion, LLMBackend, SamplingParams

__all__ = ["LazyBackend"]


class LazyBackend:
    """Build the real backend with ``factory`` on the first :meth:`generate` call.

    Args:
        factory: builds the backend (may be slow: loads weights).
        name: backend name reported before it is built.
        requires_path: if given, generation answers 503 until ``<path>/config.json`` exists.
    """

    def __init__(
        self,
        factory: Callable[[], LLMBackend],
        *,
        name: str = "lazy",
        requires_path: str | None = None,
    ) -> None:
        self._factory = factory
        self._backend: LLMBackend | None = None
        self._lock = threading.Lock()
        self.name = name
        self.requires_path = requires_path

    @property
    def loaded(self) -> bool:
        """True once the real backend was built."""
        return self._backend is not None

    def _get(self) -> LLMBackend:
        with self._lock:
            if self._backend is None:
                if self.requires_path and not (Path(self.requires_path) / "config.json").exists():
                    raise BackendUnavailableError(
                        f"model checkpoint '{self.requires_path}' does not exist yet (train the "
                        "experience model first)",
                        retry_after_s=30.0,
                    )
                self._backend = self._factory()
            return self._backend

    def generate(self, prompts: list[str], params: list[SamplingParams]) -> list[Completion]:
        """Build the backend if needed, then generate.

        Raises:
            BackendUnavailableError: the required checkpoint does not exist yet (503).
        """
        return self._get().generate(prompts, params)
