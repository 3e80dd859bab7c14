"""HTTP layer: dependencies and thin route handlers."""
