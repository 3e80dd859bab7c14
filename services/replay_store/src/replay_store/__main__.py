"""``python -m replay_store`` / ``replay-store``: serve the replay store with uvicorn."""

from __future__ import annotations

import uvicorn

from replay_store.main import create_app
from replay_store.settings import get_settings


def main() -> None:
    """Run the service on ``REPLAY_STORE_HOST:REPLAY_STORE_PORT``."""
    settings = get_settings()
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_config=None,  # the app configures logging (JSON lines) itself
    )


if __name__ == "__main__":
    main()
