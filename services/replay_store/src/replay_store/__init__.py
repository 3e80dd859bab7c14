"""DreamGym replay store service.

Stores real and synthetic trajectories in PostgreSQL, embeds every transition's
(state, action) key with pgvector, and serves top-k retrieval (DreamGym, arXiv 2511.03773, Eq. 4),
uniform sampling, keyset-paginated export and table statistics over REST. Build the app with
:func:`replay_store.main.create_app`; run it with ``replay-store`` or ``python -m replay_store``.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
