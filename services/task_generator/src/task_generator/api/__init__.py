"""HTTP layer: dependency aliases and one router module per resource."""
