"""``python -m agent_trainer`` / ``agent-trainer``: serve the job API with uvicorn."""

from __future__ import annotations

from agent_trainer.main import create_app
from agent_trainer.settings import get_settings
from dreamgym.server.run import serve


def main() -> None:
    """Run the service on ``AGENT_TRAINER_HOST:AGENT_TRAINER_PORT``."""
    settings = get_settings()
    serve(create_app(settings), settings.host, settings.port)


if __name__ == "__main__":
    main()
