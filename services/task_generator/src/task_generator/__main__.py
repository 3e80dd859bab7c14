"""``python -m task_generator`` / ``task-generator``: serve the task generator with uvicorn."""

from __future__ import annotations

from dreamgym.server.run import serve
from task_generator.main import create_app
from task_generator.settings import get_settings


def main() -> None:
    """Run the service on ``TASK_GENERATOR_HOST:TASK_GENERATOR_PORT``."""
    settings = get_settings()
    serve(create_app(settings), settings.host, settings.port)


if __name__ == "__main__":
    main()
