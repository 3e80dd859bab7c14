"""DreamGym experience model service: the imagined environment (arXiv 2511.03773 §4.1)."""

__version__ = "0.1.0"
