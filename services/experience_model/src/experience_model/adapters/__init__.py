"""I/O adapters of the experience model: LLM backends and replay-store retrieval."""
