"""HTTP layer of the experience model."""
