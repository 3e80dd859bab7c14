"""Route modules: jobs."""
