"""Tests for dreamgym.rl (a package so test module names cannot collide across the tree)."""
