"""Fixtures for tests that run real scripts (shared with the other script-running tests)."""

from prockit import no_leftovers, script  # noqa: F401  (fixtures)
