"""The DreamGym Python SDK: typed sync and async clients of the four services.

=====================  ==============================  ===================================
service                sync                            async
=====================  ==============================  ===================================
experience_model       :class:`ExperienceModelClient`  :class:`AsyncExperienceModelClient`
replay_store           :class:`ReplayStoreClient`      :class:`AsyncReplayStoreClient`
task_generator         :class:`TaskGeneratorClient`    :class:`AsyncTaskGeneratorClient`
agent_trainer          :class:`AgentTrainerClient`     :class:`AsyncAgentTrainerClient`
=====================  ==============================  ===================================

Every client takes ``base_url`` and the keyword arguments ``api_key`` (sent as
``Authorization: Bearer <key>``; default ``$DREAMGYM_API_KEY``), ``timeout_s``, ``max_retries``,
``backoff_s``, ``max_backoff_s`` and ``transport``; retries follow :mod:`dreamgym.clients.base`.

>>> from dreamgym.clients import ExperienceModelClient  # doctest: +SKIP
>>> with ExperienceModelClient("http://localhost:8001", api_key="secret") as env:  # doctest: +SKIP
...     episode = env.reset(task, seed=0)
"""

from dreamgym.clients.agent_trainer import (
    AgentTrainerClient,
    AsyncAgentTrainerClient,
    JobFailedError,
    wait_for_job,
    wait_for_job_async,
)
from dreamgym.clients.base import AsyncServiceClient, ServiceClient
from dreamgym.clients.experience_model import AsyncExperienceModelClient, ExperienceModelClient
from dreamgym.clients.replay_store import AsyncReplayStoreClient, ReplayStoreClient
from dreamgym.clients.task_generator import AsyncTaskGeneratorClient, TaskGeneratorClient

__all__ = [
    "AgentTrainerClient",
    "AsyncAgentTrainerClient",
    "AsyncExperienceModelClient",
    "AsyncReplayStoreClient",
    "AsyncServiceClient",
    "AsyncTaskGeneratorClient",
    "ExperienceModelClient",
    "JobFailedError",
    "ReplayStoreClient",
    "ServiceClient",
    "TaskGeneratorClient",
    "wait_for_job",
    "wait_for_job_async",
]
