"""HTTP layer of the agent trainer."""
