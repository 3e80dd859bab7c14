"""One router per resource, mounted under ``/v1`` by :func:`replay_store.main.create_app`."""
