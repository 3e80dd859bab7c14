"""``python -m experience_model`` / ``experience-model``: serve with uvicorn."""

from __future__ import annotations

import uvicorn

from experience_model.main import create_app
from experience_model.settings import get_settings


def main() -> None:
    """Run the service on ``EXPERIENCE_MODEL_HOST:EXPERIENCE_MODEL_PORT``."""
    settings = get_settings()
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_config=None)


if __name__ == "__main__":
    main()
