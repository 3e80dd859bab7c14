"""Routers: ``tasks`` (registry, sampling, outcomes) and ``curriculum`` (scores, generation)."""
