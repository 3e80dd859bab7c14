"""``python -m agent_trainer`` / ``agent-trainer``: serve the job API with uvicorn."""

from __future__ import annotations

import uvicorn

from agent_trainer.main import create_app
from agent_trainer.settings import get_settings


def main() -> None:
    """Run the service on ``AGENT_TRAINER_HOST:AGENT_TRAINER_PORT``."""
    settings = get_settings()
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_config=None)


if __name__ == "__main__":
    main()
