"""DreamGym agent trainer: GRPO in the imagined environment, real-env evaluation, seed data."""

__version__ = "0.1.0"
