"""Tests for dreamgym.curriculum (a package so test module names cannot collide)."""
