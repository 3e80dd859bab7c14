"""Route modules: episodes, transitions (stateless predict), model admin."""
