"""``python -m task_generator`` / ``task-generator``: serve the task generator with uvicorn."""

from __future__ import annotations

import uvicorn

from task_generator.main import create_app
from task_generator.settings import get_settings


def main() -> None:
    """Run the service on ``TASK_GENERATOR_HOST:TASK_GENERATOR_PORT``."""
    settings = get_settings()
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_config=None,  # the app configures logging (JSON lines) itself
    )


if __name__ == "__main__":
    main()
