"""Benchmarks that print figures (`nox -s bench`). Speed is measured here, never asserted in tests."""
