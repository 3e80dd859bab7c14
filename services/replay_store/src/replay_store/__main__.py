"""``python -m replay_store`` / ``replay-store``: serve the replay store with uvicorn."""

from __future__ import annotations

from dreamgym.server.run import serve
from replay_store.main import create_app
from replay_store.settings import get_settings


def main() -> None:
    """Run the service on ``REPLAY_STORE_HOST:REPLAY_STORE_PORT``."""
    settings = get_settings()
    serve(create_app(settings), settings.host, settings.port)


if __name__ == "__main__":
    main()
